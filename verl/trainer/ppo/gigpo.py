"""GiGPO: Group-in-Group Policy Optimization (Feng et al. 2025) for step-wise agent batches.

Critic-free, like GRPO, but with two nested groups:

* episode groups: the trajectories of one task (rows sharing ``index``), which
  give every trajectory an outcome advantage ``A_E``;
* anchor-state groups: the steps, across those trajectories, that acted on the
  same environment state (rows sharing ``(index, anchor_obs)``), which give
  every step a relative advantage ``A_S`` from its discounted return.

``A = A_E + step_weight * A_S``. Both layouts of the agent's batch work:

* step-wise (``agent.history_window > 0``): one row per model turn, with the
  non-tensor columns ``traj_uid``, ``step`` and ``anchor_obs``, and optionally
  ``step_reward`` (the reward a turn earned before the episode's end, see
  `compute_gigpo_advantage`); a row's tokens all get its turn's advantage;
* whole trajectories (``history_window = 0``, the default): one row per
  trajectory, whose ``turn_ends``, ``anchor_obs`` and ``step_reward`` hold one
  entry per model turn; the estimator sees each turn as a row of its own
  (`turn_rows`) and gives turn ``k``'s advantage to the tokens after turn
  ``k-1``'s last token up to and including turn ``k``'s. The same groups and the same
  advantages as the step-wise layout with the full history, at the cost of one
  sequence per trajectory instead of one per turn.

Importing this module registers the estimator as ``"gigpo"``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np
import torch

from verl.core_algos import EQUAL_SCORE_GROUP_SHARE, equal_score_group_share, register_adv_est
from verl.protocol import DataProto
from verl.utils.typed_config import defaults_from, require

REQUIRED_COLUMNS = ("traj_uid", "step", "anchor_obs")
STEP_REWARD = "step_reward"

Key = tuple[Hashable, Hashable]  # (index, traj_uid) for a trajectory, (index, anchor_obs) for an anchor group


@dataclass
class TurnRows:
    """A batch seen as one row per model turn: the step-wise layout's inputs for those rows. For a whole-trajectory
    batch ``pairs[v] = (b, k)`` says turn row ``v`` is turn ``k`` of row ``b``; a step-wise batch is its own view
    (``pairs`` None)."""

    pairs: list[tuple[int, int]] | None
    outcome: np.ndarray
    live: np.ndarray
    index: np.ndarray
    non_tensor_batch: dict[str, Any]


def turn_rows(outcome: np.ndarray, live: np.ndarray, index: np.ndarray, non_tensor_batch: dict[str, Any]) -> TurnRows:
    """One row per entry of each row's ``turn_ends`` (a failed row has none), carrying the row's outcome, liveness
    and group, the trajectory's row number as ``traj_uid``, ``k`` as ``step`` and turn ``k``'s ``anchor_obs``
    (and ``step_reward``)."""
    missing = [name for name in ("turn_ends", "anchor_obs") if name not in non_tensor_batch]
    if missing:
        raise ValueError(
            f"GiGPO needs the non-tensor column(s) {', '.join(repr(m) for m in missing)}: per-turn anchor "
            "states, which the built-in agent's rollout (data.rollout=agent) builds"
        )
    ends, anchors = non_tensor_batch["turn_ends"], non_tensor_batch["anchor_obs"]
    paid = non_tensor_batch.get(STEP_REWARD)
    pairs = [(b, k) for b in range(len(outcome)) for k in range(len(ends[b]))]
    for b in range(len(outcome)):
        if len(anchors[b]) != len(ends[b]) or (paid is not None and len(paid[b]) != len(ends[b])):
            raise ValueError(
                f"row {b}: {len(ends[b])} turn ends but {len(anchors[b])} anchor states"
                + ("" if paid is None else f" and {len(paid[b])} step rewards")
            )
    rows = [b for b, _ in pairs]
    columns = {
        "traj_uid": [b for b, _ in pairs],
        "step": [k for _, k in pairs],
        "anchor_obs": [anchors[b][k] for b, k in pairs],
    }
    if paid is not None:
        columns[STEP_REWARD] = [float(paid[b][k]) for b, k in pairs]
    return TurnRows(pairs, outcome[rows], live[rows], np.asarray(index)[rows], columns)


def _turn_view(
    outcome: np.ndarray, live: np.ndarray, index: np.ndarray, non_tensor_batch: dict[str, Any] | None
) -> TurnRows:
    """The batch as turn rows: a step-wise batch as it is, whole trajectories through `turn_rows`."""
    if non_tensor_batch is None or "traj_uid" in non_tensor_batch or "turn_ends" not in non_tensor_batch:
        return TurnRows(None, outcome, live, index, non_tensor_batch)
    return turn_rows(outcome, live, index, non_tensor_batch)


def _columns(non_tensor_batch: dict[str, Any] | None, rows: int) -> tuple[list[Hashable], list[int], list[Hashable]]:
    """``traj_uid``, ``step`` and ``anchor_obs`` as lists of length ``rows``; a clear error when one is absent."""
    non_tensor_batch = non_tensor_batch if non_tensor_batch is not None else {}
    missing = [name for name in REQUIRED_COLUMNS if name not in non_tensor_batch]
    if missing:
        raise ValueError(
            f"GiGPO needs the non-tensor column(s) {', '.join(repr(m) for m in missing)}: one row per "
            "model turn (agent.history_window > 0), or whole trajectories with per-turn turn_ends and anchor_obs"
        )
    for name in (*REQUIRED_COLUMNS, STEP_REWARD):
        if name in non_tensor_batch and len(non_tensor_batch[name]) != rows:
            raise ValueError(
                f"non-tensor column '{name}' has length {len(non_tensor_batch[name])} but the batch has {rows} rows"
            )
    return (
        list(non_tensor_batch["traj_uid"]),
        [int(k) for k in non_tensor_batch["step"]],
        list(non_tensor_batch["anchor_obs"]),
    )


def _normalised(values: np.ndarray, norm_by_std: bool, epsilon: float) -> np.ndarray:
    """``(x - mean) / (std + eps)`` with the unbiased std, or ``x - mean``; 0 for fewer than two values."""
    if len(values) < 2:
        return np.zeros_like(values)
    centred = values - values.mean()
    return centred / (values.std(ddof=1) + epsilon) if norm_by_std else centred


def _varies(values: list[float]) -> bool:
    return any(v != values[0] for v in values[1:])


@dataclass
class _Episodes:
    """A step-wise batch seen as trajectories (only those with a live row, i.e. a model token)."""

    traj_of: list[Key]  # each row's trajectory
    outcomes: dict[Key, float]  # R per trajectory
    episode_groups: dict[Hashable, list[Key]]  # index -> its trajectories
    step_returns: np.ndarray  # (rows,) G of each live row, 0 elsewhere
    anchor_groups: dict[Key, list[int]]  # (index, anchor_obs) -> its live rows


def _episodes(
    outcome: np.ndarray, live: np.ndarray, index: np.ndarray, non_tensor_batch: dict[str, Any] | None, step_gamma: float
) -> _Episodes:
    """Trajectories, outcomes ``R``, step returns ``G`` and anchor groups, as `compute_gigpo_advantage` defines them."""
    rows = len(outcome)
    if len(index) != rows:
        raise ValueError(f"index has length {len(index)} but the batch has {rows} rows")
    traj_uids, steps, anchors = _columns(non_tensor_batch, rows)
    paid = np.asarray(non_tensor_batch.get(STEP_REWARD, np.zeros(rows)), dtype=np.float64)
    traj_of = [(index[i], traj_uids[i]) for i in range(rows)]
    members: dict[Key, list[int]] = defaultdict(list)
    for i, key in enumerate(traj_of):
        members[key].append(i)

    outcomes: dict[Key, float] = {}
    step_returns = np.zeros(rows, dtype=np.float64)
    for key, traj_rows in members.items():
        live_rows = [i for i in traj_rows if live[i]]
        if not live_rows:
            continue
        outcomes[key] = float(outcome[max(live_rows, key=lambda i: steps[i])])
        r = np.zeros(max(steps[i] for i in traj_rows) + 1)  # r_0 .. r_{K-1}
        for i in traj_rows:
            r[steps[i]] = paid[i]
        r[-1] = outcomes[key] - r[:-1].sum()
        returns = np.zeros_like(r)
        running = 0.0
        for k in reversed(range(len(r))):
            running = r[k] + step_gamma * running
            returns[k] = running
        step_returns[live_rows] = returns[[steps[i] for i in live_rows]]

    episode_groups: dict[Hashable, list[Key]] = defaultdict(list)
    for key in outcomes:
        episode_groups[key[0]].append(key)
    anchor_groups: dict[Key, list[int]] = defaultdict(list)
    for i in range(rows):
        if live[i]:
            anchor_groups[(index[i], anchors[i])].append(i)
    return _Episodes(traj_of, outcomes, episode_groups, step_returns, anchor_groups)


def has_signal(
    scores: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    non_tensor_batch: dict[str, Any],
    step_gamma: float,
) -> bool:
    """Whether GiGPO can give a row a non-zero advantage: the outcomes ``R`` of an episode group differ, or
    the step returns ``G`` of an anchor group differ (so a group whose episodes all scored the same still
    teaches which step was better when, e.g., one reached the same state later or earned more on the way)."""
    live = (response_mask != 0).any(dim=-1).cpu().numpy()
    view = _turn_view(scores.detach().to("cpu", torch.float64).numpy(), live, index, non_tensor_batch)
    ep = _episodes(view.outcome, view.live, view.index, view.non_tensor_batch, step_gamma)
    return any(_varies([ep.outcomes[k] for k in keys]) for keys in ep.episode_groups.values()) or any(
        _varies(ep.step_returns[rows].tolist()) for rows in ep.anchor_groups.values()
    )


@dataclass
@defaults_from("ppo_trainer", "algorithm.gigpo")
class GiGPOOptions:
    """GiGPO's options, the section ``algorithm.gigpo``: per-step returns discounted over turns by ``step_gamma``
    (not GAE's token ``gamma``); ``A = A_episode + step_weight * A_step``; ``norm_by_std`` divides both
    levels by their group's std (on by default, as in the GiGPO paper: the step returns met at one state
    differ by a few discount factors, so centred alone ``A_step`` would be dwarfed by ``A_episode``);
    GiGPO ignores ``norm_adv_by_std_in_grpo``."""

    step_gamma: float
    step_weight: float
    norm_by_std: bool

    def validate(self, where: str) -> None:
        require(0 <= self.step_gamma <= 1, f"{where}.step_gamma", "in [0, 1]", self.step_gamma)


def _check(cfg: Any) -> str | None:
    if cfg.data.rollout != "agent":
        return (
            f"algorithm.adv_estimator=gigpo needs the per-turn anchor states that only the built-in agent's rollout "
            f"builds: data.rollout=agent (got {cfg.data.rollout})"
        )
    return None


def _informative(group: DataProto, options: Any) -> bool:
    """Dynamic sampling keeps a task's rows while `has_signal` says GiGPO can give one a non-zero advantage."""
    b = group.batch
    return has_signal(
        b["outcome_scores"],
        b["response_mask"],
        group.non_tensor_batch["uid"],
        group.non_tensor_batch,
        options.step_gamma,
    )


@register_adv_est("gigpo", group_baseline=True, options=GiGPOOptions, check=_check, informative=_informative)
@torch.no_grad()
def compute_gigpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    non_tensor_batch: dict[str, np.ndarray],
    scores: torch.Tensor | None = None,
    step_gamma: float = 0.95,
    step_weight: float = 1.0,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    metrics: dict[str, float] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GiGPO advantage over step-wise rows (one row per model turn), or over whole trajectories seen as their
    turns (`turn_rows`; see the module docstring for how turn ``k``'s advantage reaches its tokens).

    Rows with an all-zero ``response_mask`` (failed) join no group and get 0.
    A trajectory is the set of rows sharing ``(index, traj_uid)``, its turns
    ``k = 0 .. K-1`` (``step``; ``K = max(step) + 1`` over its rows); its
    outcome ``R`` is ``scores`` (or ``token_level_rewards.sum(-1)`` when None)
    at its last non-failed step.

    Episode level, over the trajectories of a group ``g`` (same ``index``)::

        A_E = (R - mean_g(R)) / (std_g(R) + eps)      (unbiased std)
        A_E = R - mean_g(R)                           (norm_by_std=False)
        A_E = 0                                       (a group of one trajectory)

    Step level: the discounted sum of the rewards from turn ``k`` on::

        G_k = sum_{j=k}^{K-1} step_gamma ** (j - k) * r_j
        r_j = step_reward_j                           (j < K-1)
        r_{K-1} = R - sum_{j<K-1} r_j                 (what the outcome adds at the end)

    where ``step_reward_j`` is the non-tensor column ``step_reward`` of turn
    ``j``'s row: the reward the environment paid for that turn, in the units of
    ``R`` (e.g. SciWorld's score increment over its reward scale); 0 when the
    column is absent, which leaves ``G_k = step_gamma ** (K-1-k) * R``. The
    turns' rewards add up to the outcome (``sum_j r_j = R``), so with
    ``step_gamma = 1`` ``G_k`` is what the episode still earned from turn ``k`` on.
    Over the rows of an anchor group ``a`` (same ``(index, anchor_obs)``)::

        A_S = (G - mean_a(G)) / (std_a(G) + eps)      (unbiased std; no division when norm_by_std=False)
        A_S = 0                                       (an anchor group of one row)

    ``A = (A_E + step_weight * A_S) * response_mask``, broadcast over the tokens.
    ``norm_by_std`` defaults to True, as in the GiGPO paper: the step returns met
    at one state differ by little (a few discount factors), so without the std
    division ``A_S`` would be far smaller than ``A_E`` and ``step_weight`` would
    need retuning per env. With ``metrics`` (a dict): ``gigpo/anchor_step_share``
    (share of non-failed rows in an anchor group of >= 2 rows),
    ``gigpo/anchor_group_size/mean`` (mean size of those groups; 0.0 if none)
    and ``adv/equal_score_group_share`` (episode groups of >= 2 trajectories whose
    ``R`` are all equal, `equal_score_group_share`). Returns ``(advantages, advantages)``.
    """
    rows = token_level_rewards.shape[0]
    outcome = token_level_rewards.sum(dim=-1) if scores is None else scores
    if outcome.shape != (rows,):
        raise ValueError(f"scores must have shape ({rows},), got {tuple(outcome.shape)}")
    view = _turn_view(
        outcome.detach().to("cpu", torch.float64).numpy(),
        (response_mask != 0).any(dim=-1).cpu().numpy(),
        index,
        non_tensor_batch,
    )
    live, turns = view.live, len(view.outcome)
    ep = _episodes(view.outcome, live, view.index, view.non_tensor_batch, step_gamma)

    episode_adv: dict[Key, float] = {}
    for keys in ep.episode_groups.values():
        outcomes = np.array([ep.outcomes[k] for k in keys], dtype=np.float64)
        episode_adv.update(zip(keys, _normalised(outcomes, norm_by_std, epsilon).tolist()))
    step_adv = np.zeros(turns, dtype=np.float64)
    for members in ep.anchor_groups.values():
        step_adv[members] = _normalised(ep.step_returns[members], norm_by_std, epsilon)

    combined = np.zeros(turns, dtype=np.float64)
    for i in range(turns):
        if live[i]:
            combined[i] = episode_adv[ep.traj_of[i]] + step_weight * step_adv[i]
    if view.pairs is None:
        per_row = torch.as_tensor(combined, dtype=token_level_rewards.dtype, device=token_level_rewards.device)
        advantages = per_row.unsqueeze(-1) * response_mask
    else:  # turn k of row b: the tokens after turn k-1's last token, up to and including turn k's last
        ends = non_tensor_batch["turn_ends"]
        per_token = torch.zeros(response_mask.shape, dtype=torch.float64)
        for v, (b, k) in enumerate(view.pairs):
            per_token[b, (ends[b][k - 1] + 1 if k else 0) : ends[b][k] + 1] = combined[v]
        advantages = per_token.to(device=token_level_rewards.device, dtype=token_level_rewards.dtype) * response_mask

    if metrics is not None:
        shared = [len(members) for members in ep.anchor_groups.values() if len(members) >= 2]
        live_rows = int(live.sum())
        metrics["gigpo/anchor_step_share"] = sum(shared) / live_rows if live_rows else 0.0
        metrics["gigpo/anchor_group_size/mean"] = sum(shared) / len(shared) if shared else 0.0
        metrics[EQUAL_SCORE_GROUP_SHARE] = equal_score_group_share(
            [ep.outcomes[k] for k in keys] for keys in ep.episode_groups.values()
        )
    return advantages, advantages
