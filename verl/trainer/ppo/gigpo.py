"""GiGPO: Group-in-Group Policy Optimization (Feng et al. 2025) for step-wise agent batches.

Critic-free, like GRPO, but with two nested groups:

* episode groups: the trajectories of one task (rows sharing ``index``), which
  give every trajectory an outcome advantage ``A_E``;
* anchor-state groups: the steps, across those trajectories, that acted on the
  same environment state (rows sharing ``(index, anchor_obs)``), which give
  every step a relative advantage ``A_S`` from its discounted return.

``A = A_E + step_weight * A_S``. The batch is the agent's step-wise layout
(``agent.history_window > 0``): one row per model turn, with the non-tensor
columns ``traj_uid``, ``step`` and ``anchor_obs``.
Importing this module registers the estimator as ``"gigpo"``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Hashable

import numpy as np
import torch

from verl.trainer.ppo.core_algos import register_adv_est

REQUIRED_COLUMNS = ("traj_uid", "step", "anchor_obs")


def _columns(non_tensor_batch: dict[str, Any] | None, rows: int) -> tuple[list[Hashable], list[int], list[Hashable]]:
    """``traj_uid``, ``step`` and ``anchor_obs`` as lists of length ``rows``; a clear error when one is absent."""
    non_tensor_batch = non_tensor_batch if non_tensor_batch is not None else {}
    missing = [name for name in REQUIRED_COLUMNS if name not in non_tensor_batch]
    if missing:
        raise ValueError(f"GiGPO needs the non-tensor column(s) {', '.join(repr(m) for m in missing)}, which only the "
                         "agent's step-wise mode (agent.history_window > 0) builds: one row per model turn")
    for name in REQUIRED_COLUMNS:
        if len(non_tensor_batch[name]) != rows:
            raise ValueError(f"non-tensor column '{name}' has length {len(non_tensor_batch[name])} "
                             f"but the batch has {rows} rows")
    return (list(non_tensor_batch["traj_uid"]), [int(k) for k in non_tensor_batch["step"]],
            list(non_tensor_batch["anchor_obs"]))


def _normalised(values: np.ndarray, norm_by_std: bool, epsilon: float) -> np.ndarray:
    """``(x - mean) / (std + eps)`` with the unbiased std, or ``x - mean``; 0 for fewer than two values."""
    if len(values) < 2:
        return np.zeros_like(values)
    centred = values - values.mean()
    return centred / (values.std(ddof=1) + epsilon) if norm_by_std else centred


@register_adv_est("gigpo")
@torch.no_grad()
def compute_gigpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    non_tensor_batch: dict[str, np.ndarray],
    scores: torch.Tensor | None = None,
    step_gamma: float = 0.95,
    step_weight: float = 1.0,
    norm_adv_by_std_in_grpo: bool = True,
    epsilon: float = 1e-6,
    metrics: dict[str, float] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GiGPO advantage over step-wise rows (one row per model turn).

    Rows with an all-zero ``response_mask`` (failed) join no group and get 0.
    A trajectory is the set of rows sharing ``(index, traj_uid)``; its outcome
    ``R`` is ``scores`` (or ``token_level_rewards.sum(-1)`` when None) at its
    last non-failed step, and ``K = max(step) + 1`` over its rows.

    Episode level, over the trajectories of a group ``g`` (same ``index``)::

        A_E = (R - mean_g(R)) / (std_g(R) + eps)      (unbiased std)
        A_E = R - mean_g(R)                           (norm_adv_by_std_in_grpo=False)
        A_E = 0                                       (a group of one trajectory)

    Step level, with the outcome paid at the last step and discounted back::

        G_k = step_gamma ** (K - 1 - k) * R

    over the rows of an anchor group ``a`` (same ``(index, anchor_obs)``)::

        A_S = (G - mean_a(G)) / (std_a(G) + eps)      (unbiased std; no division when the flag is False)
        A_S = 0                                       (an anchor group of one row)

    ``A = (A_E + step_weight * A_S) * response_mask``, broadcast over the tokens.
    With ``metrics`` (a dict): ``gigpo/anchor_step_share`` (share of non-failed
    rows in an anchor group of >= 2 rows) and ``gigpo/anchor_group_size/mean``
    (mean size of those groups; 0.0 if none). Returns ``(advantages, advantages)``.
    """
    rows = token_level_rewards.shape[0]
    if len(index) != rows:
        raise ValueError(f"index has length {len(index)} but the batch has {rows} rows")
    traj_uids, steps, anchors = _columns(non_tensor_batch, rows)
    outcome = token_level_rewards.sum(dim=-1) if scores is None else scores
    if outcome.shape != (rows,):
        raise ValueError(f"scores must have shape ({rows},), got {tuple(outcome.shape)}")
    outcome = outcome.detach().to("cpu", torch.float64).numpy()
    live = (response_mask != 0).any(dim=-1).cpu().numpy()

    # trajectories: K from all their rows, R from the last live row; only those with a live row take part
    trajectories: dict[tuple[Hashable, Hashable], list[int]] = defaultdict(list)
    for i in range(rows):
        trajectories[(index[i], traj_uids[i])].append(i)
    num_steps = {key: max(steps[i] for i in members) + 1 for key, members in trajectories.items()}
    returns_of: dict[tuple[Hashable, Hashable], float] = {}
    for key, members in trajectories.items():
        live_members = [i for i in members if live[i]]
        if live_members:
            returns_of[key] = float(outcome[max(live_members, key=lambda i: steps[i])])

    # episode level: one value per trajectory, grouped by index
    episode_groups: dict[Hashable, list[tuple[Hashable, Hashable]]] = defaultdict(list)
    for key in returns_of:
        episode_groups[key[0]].append(key)
    episode_adv: dict[tuple[Hashable, Hashable], float] = {}
    for keys in episode_groups.values():
        outcomes = np.array([returns_of[k] for k in keys], dtype=np.float64)
        episode_adv.update(zip(keys, _normalised(outcomes, norm_adv_by_std_in_grpo, epsilon).tolist()))

    # step level: G_k = step_gamma ** (K - 1 - k) * R, grouped by (index, anchor_obs)
    anchor_groups: dict[tuple[Hashable, Hashable], list[int]] = defaultdict(list)
    step_returns = np.zeros(rows, dtype=np.float64)
    for i in range(rows):
        if live[i]:
            key = (index[i], traj_uids[i])
            step_returns[i] = step_gamma ** (num_steps[key] - 1 - steps[i]) * returns_of[key]
            anchor_groups[(index[i], anchors[i])].append(i)
    step_adv = np.zeros(rows, dtype=np.float64)
    for members in anchor_groups.values():
        step_adv[members] = _normalised(step_returns[members], norm_adv_by_std_in_grpo, epsilon)

    combined = np.zeros(rows, dtype=np.float64)
    for i in range(rows):
        if live[i]:
            combined[i] = episode_adv[(index[i], traj_uids[i])] + step_weight * step_adv[i]
    per_row = torch.as_tensor(combined, dtype=token_level_rewards.dtype, device=token_level_rewards.device)
    advantages = per_row.unsqueeze(-1) * response_mask

    if metrics is not None:
        shared = [len(members) for members in anchor_groups.values() if len(members) >= 2]
        live_rows = int(live.sum())
        metrics["gigpo/anchor_step_share"] = sum(shared) / live_rows if live_rows else 0.0
        metrics["gigpo/anchor_group_size/mean"] = sum(shared) / len(shared) if shared else 0.0
    return advantages, advantages
