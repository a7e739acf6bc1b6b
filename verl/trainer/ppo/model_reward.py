"""A learned reward model's or an LLM judge's score in the reward (``reward_model.*``),
the env's reward logged beside it.

After the reward path (`verl.trainer.ppo.reward.RewardManager`) has written each row's reward
``R_env``, the reward-model group returns ``rm_scores`` ``(B, T)``: ``r(x_{<=P+t})`` at every response
token (`verl.workers.reward_model`); a judge (`verl.trainer.ppo.judge`) puts its score on each row's last
model token instead. Per live row, with ``f`` = sigmoid or identity (``reward_model.transform``; a judge's
score is used as it is) and ``e_0 < ... < e_{K-1}`` the last model token of each turn:

    s_k = f(r at e_k),   s = s_{K-1}                       (the trajectory is scored at its final action)
    R   = s                                  combine=replace
    R   = R_env + weight * s                 combine=add

``outcome_scores`` = R. ``token_level_scores``: without ``per_turn``, R placed by
``algorithm.reward_allocation`` as any reward is; with ``per_turn``, the score's part is paid turn by
turn, ``d_k = s_k - s_{k-1}`` (``s_{-1} = 0``) at ``e_k`` (process rewards that sum to ``s``), plus, under
add, ``R_env`` placed by the allocation. GiGPO's per-turn rewards (``step_reward``) follow: the env's
are kept under add and dropped under replace, and with ``per_turn`` each turn's ``weight * d_k`` is added.

A row whose score is not finite (a judge that timed out, answered nonsense or is down) is marked
failed (out of groups, loss and denominators), with its reason, and counted in ``reward_model/failures``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.reward import RewardManager, mark_failed
from verl.utils.ranking import group_agreement, roc_auc
from verl.workers.config import RewardModelConfig


def transform(r: float, how: str) -> float:
    """``sigmoid(r)`` or ``r`` (``reward_model.transform``)."""
    if how == "raw":
        return r
    return 1.0 / (1.0 + math.exp(-r)) if r >= 0 else math.exp(r) / (1.0 + math.exp(r))


def turn_positions(response_mask: torch.Tensor, turn_ends: list[int] | None) -> list[int]:
    """The response positions a row is scored at: its turns' last model tokens, else its last model token."""
    if turn_ends:
        return [int(e) for e in turn_ends]
    model = response_mask.nonzero().flatten()
    return [int(model[-1])] if len(model) else []


def apply_model_reward(
    batch: DataProto,
    rm_scores: torch.Tensor,
    cfg: RewardModelConfig,
    manager: RewardManager,
    errors: dict[int, str] | None = None,
) -> dict[str, float]:
    """Rewrite ``outcome_scores`` and ``token_level_scores`` of ``batch`` with the scores (module docstring);
    returns ``reward_model/*`` metrics (the env's reward and success beside the score). A judge's scores
    (``cfg.kind`` judge) are used as they are (no ``transform``); ``errors``: why a row has no score."""
    nt, b = batch.non_tensor_batch, batch.batch
    n = len(batch)
    env = b["outcome_scores"].tolist()
    success = nt.get("success", [None] * n)
    turns: list[list[tuple[int, float]]] = [[] for _ in range(n)]  # per row: (position, s_k)
    failures = 0
    for i in range(n):
        if bool(nt["failed"][i]):
            continue
        ends = nt["turn_ends"][i] if "turn_ends" in nt else None
        positions = turn_positions(b["response_mask"][i], list(ends) if ends is not None else None)
        if not cfg.per_turn:
            positions = positions[-1:]
        raw = [float(rm_scores[i, p]) for p in positions]
        if not positions or not all(math.isfinite(r) for r in raw):
            mark_failed(batch, [i], (errors or {}).get(i) or f"reward model: no finite score (got {raw[:4]})")
            failures += 1
            continue
        how = "raw" if cfg.uses_judge else cfg.transform
        turns[i] = [(p, transform(r, how)) for p, r in zip(positions, raw)]
    live = [i for i in range(n) if turns[i]]
    scores = {i: turns[i][-1][1] for i in live}
    shares = {
        i: [(p, s - (turns[i][k - 1][1] if k else 0.0)) for k, (p, s) in enumerate(turns[i])] for i in live
    }  # d_k
    weight = cfg.weight if cfg.combine == "add" else 1.0
    base = [env[i] if cfg.combine == "add" and i in scores else 0.0 for i in range(n)]
    if cfg.per_turn:
        manager.place(batch, base)
        token = batch.batch["token_level_scores"]
        for i in live:
            for p, d in shares[i]:
                token[i, p] += weight * d
        batch.batch["outcome_scores"] = torch.tensor(
            [base[i] + weight * scores.get(i, 0.0) for i in range(n)], dtype=torch.float32
        )
    else:
        manager.place(batch, [base[i] + weight * scores.get(i, 0.0) for i in range(n)])
    if "step_reward" in nt:  # GiGPO's per-turn rewards, in the same terms
        for i in live:
            env_steps = [float(r) for r in nt["step_reward"][i]]
            steps = env_steps if cfg.combine == "add" else [0.0] * len(env_steps)
            if cfg.per_turn and len(shares[i]) == len(steps):
                steps = [r + weight * d for r, (_, d) in zip(steps, shares[i])]
            nt["step_reward"][i] = steps
    metrics = {"reward_model/failures": float(failures)}
    if live:
        s = np.array([scores[i] for i in live])
        metrics.update(
            {
                "reward_model/score/mean": float(s.mean()),
                "reward_model/score/std": float(s.std()),
                "reward_model/env_reward/mean": float(np.mean([env[i] for i in live])),
            }
        )
        labelled = [i for i in live if success[i] is not None]
        if labelled:
            ok = [bool(success[i]) for i in labelled]
            auc = roc_auc([scores[i] for i in labelled], ok)
            agree, pairs = group_agreement(
                [scores[i] for i in labelled], [float(v) for v in ok], [nt["uid"][i] for i in labelled]
            )
            metrics["reward_model/env_success/mean"] = float(np.mean(ok))
            if auc is not None:
                metrics["reward_model/auc"] = auc
            if agree is not None:
                metrics["reward_model/agreement"] = agree
            metrics["reward_model/agreement_pairs"] = float(pairs)
    return metrics
