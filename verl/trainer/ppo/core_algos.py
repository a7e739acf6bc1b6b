"""The RL arithmetic: advantage estimators, KL penalties, policy and value losses.

Shapes: every per-token tensor is ``(B, T)`` over the response. ``response_mask``
is 1 on tokens the model generated and 0 on padding and on environment
observation tokens inside a multi-turn response, so every formula below skips
observation tokens the same way it skips padding.

References: PPO (Schulman et al. 2017), GAE (Schulman et al. 2016), GRPO
(Shao et al. 2024), Dr. GRPO (Liu et al. 2025), RLOO (Ahmadian et al. 2024),
REINFORCE++ (Hu 2025), ReMax (Li et al. 2023), dual-clip PPO (Ye et al. 2020),
KL estimators k1/k2/k3 (Schulman 2020).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

import numpy as np
import torch

from verl.protocol import DataProto

# --------------------------------------------------------------------------- masked statistics


def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """``sum(values * mask)`` over ``axis`` (all elements when None)."""
    return (values * mask).sum() if axis is None else (values * mask).sum(dim=axis)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """``sum(x * m) / sum(m)``; 0 where the mask is empty."""
    denom = mask.sum() if axis is None else mask.sum(dim=axis)
    return masked_sum(values, mask, axis) / denom.clamp_min(1e-8)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Masked variance ``mean_m((x - mean_m(x))^2)``, times ``n / (n - 1)`` when unbiased (n = sum(m))."""
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    if unbiased:
        n = mask.sum()
        if n <= 1:
            raise ValueError(f"unbiased masked variance needs at least 2 unmasked elements, got {float(n)}")
        var = var * n / (n - 1)
    return var


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """``(x - mean_m(x)) / sqrt(var_m(x) + 1e-8)`` with the unbiased masked variance.

    With ``shift_mean=False`` the mean is added back (only the scale changes).
    """
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    return whitened if shift_mean else whitened + mean


# --------------------------------------------------------------------------- advantage estimators

AdvantageFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]
ADV_ESTIMATORS: dict[str, AdvantageFn] = {}
ESTIMATORS_NEEDING_CRITIC: set[str] = set()


def register_adv_est(name: str, needs_critic: bool = False) -> Callable[[AdvantageFn], AdvantageFn]:
    """Register an advantage estimator under ``name``.

    The trainer calls every estimator with keyword arguments only:
    ``token_level_rewards``, ``response_mask``, ``index`` (group ids), ``values``,
    ``reward_baselines``, ``gamma``, ``lam``, ``norm_adv_by_std_in_grpo``;
    an estimator takes what it needs and accepts the rest through ``**kwargs``.
    It returns ``(advantages, returns)``, both ``(B, T)``.
    """

    def decorator(fn: AdvantageFn) -> AdvantageFn:
        if name in ADV_ESTIMATORS and ADV_ESTIMATORS[name] is not fn:
            raise ValueError(f"advantage estimator '{name}' is already registered")
        ADV_ESTIMATORS[name] = fn
        if needs_critic:
            ESTIMATORS_NEEDING_CRITIC.add(name)
        return fn

    return decorator


def get_adv_estimator_fn(name: str) -> AdvantageFn:
    """The estimator registered as ``name``; unknown names list the known ones."""
    if name not in ADV_ESTIMATORS:
        raise ValueError(f"unknown advantage estimator '{name}'; known: {sorted(ADV_ESTIMATORS)}")
    return ADV_ESTIMATORS[name]


@register_adv_est("gae", needs_critic=True)
@torch.no_grad()
def compute_gae_advantage_return(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation that skips observation tokens.

    Backward over t, with ``nextvalues = lastgaelam = 0`` at the end::

        delta_t = r_t + gamma * nextvalues - V_t
        g_t     = delta_t + gamma * lam * lastgaelam
        if mask_t == 1: nextvalues, lastgaelam = V_t, g_t   (else both carry over)
        A_t     = lastgaelam

    so the TD chain jumps from one model token to the next across masked
    observation tokens. ``returns = A + V``; advantages are whitened over the
    mask and zeroed outside it.
    """
    mask = response_mask.to(values.dtype)
    nextvalues = torch.zeros_like(values[:, 0])
    lastgaelam = torch.zeros_like(values[:, 0])
    advantages_reversed = []
    for t in reversed(range(token_level_rewards.shape[1])):
        delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
        g = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = g * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = torch.stack(advantages_reversed[::-1], dim=1)
    returns = advantages + values
    advantages = masked_whiten(advantages, mask) * mask
    return advantages, returns


def _group_scores(index: np.ndarray, scores: torch.Tensor) -> dict[object, list[int]]:
    groups: dict[object, list[int]] = defaultdict(list)
    for row, gid in enumerate(index):
        groups[gid].append(row)
    if len(index) != scores.shape[0]:
        raise ValueError(f"index has length {len(index)} but the batch has {scores.shape[0]} rows")
    return groups


@register_adv_est("grpo")
@torch.no_grad()
def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO outcome advantage: ``(s - mean_g) / (std_g + eps)`` broadcast over the mask.

    ``s`` is the row's summed reward, ``g`` its group (rows sharing ``index``);
    mean and unbiased std are over the group, with mean 0 and std 1 for a group
    of one. ``norm_adv_by_std_in_grpo=False`` gives Dr. GRPO's ``s - mean_g``.
    Returns ``(advantages, advantages)``.
    """
    scores = token_level_rewards.sum(dim=-1)
    out = scores.clone()
    for rows in _group_scores(index, scores).values():
        group = scores[rows]
        if len(rows) == 1:
            mean, std = torch.zeros((), dtype=scores.dtype), torch.ones((), dtype=scores.dtype)
        else:
            mean, std = group.mean(), group.std(unbiased=True)
        out[rows] = (group - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else group - mean
    advantages = out.unsqueeze(-1) * response_mask
    return advantages, advantages


@register_adv_est("dr_grpo")
def compute_dr_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, **kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dr. GRPO: GRPO without the division by the group std (``s - mean_g``)."""
    kwargs["norm_adv_by_std_in_grpo"] = False
    return compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, **kwargs)


@register_adv_est("rloo")
@torch.no_grad()
def compute_rloo_outcome_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, **kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO: leave-one-out baseline ``s*n/(n-1) - mean_g*n/(n-1)`` (= s minus the mean of the others).

    A group of one has no baseline and keeps its score. Returns ``(advantages, advantages)``.
    """
    scores = token_level_rewards.sum(dim=-1)
    out = scores.clone()
    for rows in _group_scores(index, scores).values():
        n = len(rows)
        if n >= 2:
            group = scores[rows]
            out[rows] = group * n / (n - 1) - group.mean() * n / (n - 1)
    advantages = out.unsqueeze(-1) * response_mask
    return advantages, advantages


@register_adv_est("reinforce_plus_plus")
@torch.no_grad()
def compute_reinforce_plus_plus_outcome_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float, **kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++: discounted return-to-go, whitened over the batch.

    Backward: ``running = r_t + gamma * running``; ``G_t = running``; then
    ``running *= mask_t`` (the return does not flow across masked tokens).
    Advantages are ``masked_whiten(G) * mask``. Returns ``(advantages, G)``.
    """
    returns = torch.zeros_like(token_level_rewards)
    running = torch.zeros_like(token_level_rewards[:, 0])
    mask = response_mask.to(token_level_rewards.dtype)
    for t in reversed(range(token_level_rewards.shape[1])):
        running = token_level_rewards[:, t] + gamma * running
        returns[:, t] = running
        running = running * mask[:, t]
    advantages = masked_whiten(returns, mask) * mask
    return advantages, returns


@register_adv_est("remax")
@torch.no_grad()
def compute_remax_outcome_advantage(
    token_level_rewards: torch.Tensor, reward_baselines: torch.Tensor, response_mask: torch.Tensor, **kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """ReMax: return-to-go minus the reward of the greedy sample for the same prompt.

    ``G_t = sum_{t' >= t} r_t' * mask_t'``; ``A_t = (G_t - b) * mask_t`` with
    ``b = reward_baselines`` ``(B,)``. Returns ``(advantages, G)``.
    """
    returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    advantages = (returns - reward_baselines.unsqueeze(-1)) * response_mask
    return advantages, returns


# --------------------------------------------------------------------------- KL


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    """Per-token KL estimate between the policy and the reference.

    ``kl``/``k1``: ``lp - ref``; ``abs``: ``|lp - ref|``; ``mse``/``k2``:
    ``0.5 (lp - ref)^2``; ``low_var_kl``/``k3``: with ``d = ref - lp``,
    ``clamp(exp(d) - d - 1, -10, 10)``.
    """
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob
    if kl_penalty == "abs":
        return (logprob - ref_logprob).abs()
    if kl_penalty in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kl_penalty in ("low_var_kl", "k3"):
        kl = ref_logprob - logprob
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    raise ValueError(f"unknown kl_penalty '{kl_penalty}'; known: kl, k1, abs, mse, k2, low_var_kl, k3")


_kl_estimate = kl_penalty  # apply_kl_penalty's argument of the same name shadows the function


class FixedKLController:
    """A constant KL coefficient."""

    def __init__(self, kl_coef: float):
        self.value = kl_coef

    def update(self, current_kl: float, n_steps: int) -> None:
        """Nothing to adapt."""


class AdaptiveKLController:
    """Adaptive KL coefficient (Ziegler et al. 2019).

    ``e = clip(current_kl / target_kl - 1, -0.2, 0.2)``;
    ``value *= 1 + e * n_steps / horizon``.
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int):
        if target_kl <= 0 or horizon <= 0:
            raise ValueError(f"target_kl and horizon must be positive, got {target_kl} and {horizon}")
        self.value = init_kl_coef
        self.target = target_kl
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        proportional_error = float(np.clip(current_kl / self.target - 1, -0.2, 0.2))
        self.value *= 1 + proportional_error * n_steps / self.horizon


def apply_kl_penalty(
    data: DataProto, kl_ctrl: FixedKLController | AdaptiveKLController, kl_penalty: str = "kl"
) -> tuple[DataProto, dict[str, float]]:
    """In-reward KL: ``token_level_rewards = token_level_scores - beta * KL * mask``.

    Reads ``token_level_scores``, ``old_log_probs``, ``ref_log_prob`` and
    ``response_mask`` from ``data.batch``; the reported KL is the mean over rows
    of each row's masked mean KL, and it updates ``kl_ctrl`` with the batch size.
    """
    mask = data.batch["response_mask"]
    kld = _kl_estimate(data.batch["old_log_probs"], data.batch["ref_log_prob"], kl_penalty) * mask
    beta = kl_ctrl.value
    data.batch["token_level_rewards"] = data.batch["token_level_scores"] - beta * kld
    current_kl = float(masked_mean(kld, mask, axis=-1).mean())
    kl_ctrl.update(current_kl=current_kl, n_steps=len(data))
    return data, {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": beta}


# --------------------------------------------------------------------------- losses

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def agg_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str) -> torch.Tensor:
    """Reduce a ``(B, T)`` loss to a scalar.

    ``token-mean``: ``sum(L*m) / sum(m)``; ``seq-mean-token-sum``: mean over
    rows of ``sum_t L*m``; ``seq-mean-token-mean``: mean over rows of the row's
    masked mean (rows without any unmasked token are left out);
    ``seq-mean-token-sum-norm``: ``sum(L*m) / T``.
    """
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    if loss_agg_mode == "seq-mean-token-sum":
        return masked_sum(loss_mat, loss_mask, axis=-1).mean()
    if loss_agg_mode == "seq-mean-token-mean":
        tokens = loss_mask.sum(dim=-1)
        has_tokens = tokens > 0
        if not bool(has_tokens.any()):
            return (loss_mat * loss_mask).sum()
        row_means = masked_sum(loss_mat, loss_mask, axis=-1)[has_tokens] / tokens[has_tokens]
        return row_means.mean()
    if loss_agg_mode == "seq-mean-token-sum-norm":
        return masked_sum(loss_mat, loss_mask) / loss_mask.shape[-1]
    raise ValueError(f"unknown loss_agg_mode '{loss_agg_mode}'; known: {list(LOSS_AGG_MODES)}")


def compute_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange: float | None = None,
    cliprange_low: float | None = None,
    cliprange_high: float | None = None,
    clip_ratio_c: float = 3.0,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate with dual clip for negative advantages.

    ``ratio = exp(lp - old)`` (the log-ratio is clamped to [-20, 20] before exp
    for numerical safety); ``l1 = -A * ratio``;
    ``l2 = -A * clamp(ratio, 1 - low, 1 + high)``; ``c1 = max(l1, l2)``;
    ``c2 = min(-A * clip_ratio_c, c1)``; loss = ``agg(where(A < 0, c2, c1))``.
    ``low``/``high`` default to ``cliprange``.

    Returns ``(pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower)`` with
    ``pg_clipfrac = mean_m[l2 > l1]``, ``ppo_kl = mean_m(old - lp)`` and
    ``pg_clipfrac_lower = mean_m[c1 > c2 and A < 0]``.
    """
    low = cliprange if cliprange_low is None else cliprange_low
    high = cliprange if cliprange_high is None else cliprange_high
    if low is None or high is None:
        raise ValueError("compute_policy_loss needs cliprange or both cliprange_low and cliprange_high")
    if clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1.0 for the dual clip, got {clip_ratio_c}")
    log_ratio = log_prob - old_log_prob
    ratio = torch.exp(torch.clamp(log_ratio, min=-20.0, max=20.0))
    ppo_kl = masked_mean(-log_ratio, response_mask)
    l1 = -advantages * ratio
    l2 = -advantages * torch.clamp(ratio, 1 - low, 1 + high)
    clip1 = torch.maximum(l1, l2)
    pg_clipfrac = masked_mean(torch.gt(l2, l1).float(), response_mask)
    clip2 = torch.minimum(-advantages * clip_ratio_c, clip1)
    pg_clipfrac_lower = masked_mean((torch.gt(clip1, clip2) & (advantages < 0)).float(), response_mask)
    losses = torch.where(advantages < 0, clip2, clip1)
    pg_loss = agg_loss(losses, response_mask, loss_agg_mode)
    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped value loss ``0.5 * agg(max((v - R)^2, (v_clip - R)^2))``.

    ``v_clip = clamp(v, V_old - c, V_old + c)``; ``vf_clipfrac`` is the masked
    fraction where the clipped term is the larger. Returns ``(vf_loss, vf_clipfrac)``.
    """
    vpredclipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    vf_loss = 0.5 * agg_loss(torch.maximum(vf_losses1, vf_losses2), response_mask, loss_agg_mode)
    vf_clipfrac = masked_mean(torch.gt(vf_losses2, vf_losses1).float(), response_mask)
    return vf_loss, vf_clipfrac


def compute_entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last dim: ``logsumexp(z) - sum(softmax(z) * z)``."""
    pd = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (pd * logits).sum(dim=-1)
