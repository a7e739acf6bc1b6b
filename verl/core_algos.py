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

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from verl.protocol import DataProto
from verl.utils.imports import import_registering_module

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

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")

AdvantageFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Estimator:
    """A registered advantage estimator and all it needs from the run; the config check and the trainer ask
    this, never the estimator's name, so adding an estimator touches only the file that registers it.

    ``needs_critic``: it reads critic values. ``group_baseline``: its baseline comes from the other
    samples of the same task, so it needs ``agent.n >= 2`` and dynamic sampling may drop a group in
    which every advantage would be 0. ``greedy_baseline``: it reads ``reward_baselines``, the outcome
    score of one greedy rollout of each task, which the trainer plays before the advantage (ReMax).
    ``loss_agg_mode``: what ``actor.loss_agg_mode: auto`` becomes. ``options``: a dataclass of its own
    settings, the config section ``algorithm.<name>`` (built with no arguments it holds the defaults; its
    ``validate(where)``, if any, runs when the config is checked); its fields reach the estimator as
    keyword arguments. ``check(cfg)``: a message when the config cannot run it, else None.
    ``informative(group, options)``: whether a task's rows (a `DataProto`) can get a non-zero advantage
    (dynamic sampling); None: their outcome scores differ.
    """

    fn: AdvantageFn
    needs_critic: bool = False
    group_baseline: bool = False
    greedy_baseline: bool = False
    loss_agg_mode: str = "token-mean"
    options: type | None = None
    check: Callable[[Any], str | None] | None = None
    informative: Callable[[Any, Any], bool] | None = None


ESTIMATORS: dict[str, Estimator] = {}


def register_adv_est(
    name: str,
    needs_critic: bool = False,
    group_baseline: bool = False,
    greedy_baseline: bool = False,
    loss_agg_mode: str = "token-mean",
    options: type | None = None,
    check: Callable[[Any], str | None] | None = None,
    informative: Callable[[Any, Any], bool] | None = None,
) -> Callable[[AdvantageFn], AdvantageFn]:
    """Register an advantage estimator under ``name`` with what it needs (`Estimator`).

    The trainer calls every estimator with keyword arguments only:
    ``token_level_rewards`` ``(B, T)``, ``response_mask``, ``index`` (group ids),
    ``scores`` ``(B,)`` (each row's trajectory outcome score: its reward R plus
    any in-reward KL penalty summed over its tokens, whatever the allocation),
    ``values``, ``reward_baselines``, ``gamma``, ``lam``,
    ``norm_adv_by_std_in_grpo``, ``non_tensor_batch`` (the batch's non-tensor
    columns, e.g. step ids or observation keys), the fields of its own
    ``options`` (the section ``algorithm.<name>``), and ``metrics`` (a dict the
    estimator may add ``adv/*`` entries to). An estimator takes what it needs
    and accepts the rest through ``**kwargs``. It returns ``(advantages,
    returns)``, both ``(B, T)``.
    """
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"estimator '{name}': loss_agg_mode must be one of {LOSS_AGG_MODES}, got {loss_agg_mode!r}")
    if options is not None and not dataclasses.is_dataclass(options):
        raise ValueError(f"estimator '{name}': options must be a dataclass, got {options!r}")

    def decorator(fn: AdvantageFn) -> AdvantageFn:
        if name in ESTIMATORS and ESTIMATORS[name].fn is not fn:
            raise ValueError(f"advantage estimator '{name}' is already registered")
        ESTIMATORS[name] = Estimator(
            fn, needs_critic, group_baseline, greedy_baseline, loss_agg_mode, options, check, informative
        )
        return fn

    return decorator


def get_estimator(name: str) -> Estimator:
    """The estimator registered as ``name``; unknown names list the known ones."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown advantage estimator '{name}'; known: {sorted(ESTIMATORS)}")
    return ESTIMATORS[name]


def load_estimator(spec: str) -> str:
    """The registered name ``spec`` selects: a registered name itself, or ``package.module:name``, whose module
    is imported first (its ``@register_adv_est(name)`` registers it), so an estimator may live in any file."""
    module, name = import_registering_module(spec, "advantage estimator")
    if module and name not in ESTIMATORS:
        raise ValueError(f"advantage estimator '{spec}': {module} registers no estimator named '{name}'")
    get_estimator(name)
    return name


def group_estimators() -> list[str]:
    """The registered estimators whose baseline comes from the other samples of a task, in registration order."""
    return [name for name, est in ESTIMATORS.items() if est.group_baseline]


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


def outcome_scores(token_level_rewards: torch.Tensor, scores: torch.Tensor | None) -> torch.Tensor:
    """Each row's outcome score: ``scores`` when given, else the row's summed token rewards."""
    return token_level_rewards.sum(dim=-1) if scores is None else scores.to(token_level_rewards.dtype)


def group_rows(index: np.ndarray, response_mask: torch.Tensor) -> dict[object, list[int]]:
    """Rows by group id, leaving out rows without a model token (failed rows take part in no statistic)."""
    if len(index) != response_mask.shape[0]:
        raise ValueError(f"index has length {len(index)} but the batch has {response_mask.shape[0]} rows")
    live = (response_mask.sum(dim=-1) > 0).tolist()
    groups: dict[object, list[int]] = defaultdict(list)
    for row, gid in enumerate(index):
        if live[row]:
            groups[gid].append(row)
    return groups


EQUAL_SCORE_GROUP_SHARE = "adv/equal_score_group_share"  # every group estimator logs it


def equal_score_group_share(groups: Iterable[Sequence[float]]) -> float:
    """The zero-variance share: among the groups of two or more scores, the share whose scores are all
    equal (their group-relative outcome advantages are all 0); 0.0 when there is no such group."""
    multi = [list(scores) for scores in groups if len(scores) > 1]
    equal = sum(all(s == scores[0] for s in scores) for scores in multi)
    return equal / len(multi) if multi else 0.0


def record_group_metrics(groups: dict[object, list[int]], scores: torch.Tensor, metrics: dict | None) -> None:
    """``adv/no_baseline_rows``: rows alone in their group (advantage 0); ``adv/equal_score_group_share``:
    `equal_score_group_share` of the groups' scores."""
    if metrics is None:
        return
    metrics["adv/no_baseline_rows"] = float(sum(len(rows) == 1 for rows in groups.values()))
    metrics[EQUAL_SCORE_GROUP_SHARE] = equal_score_group_share(scores[rows].tolist() for rows in groups.values())


@register_adv_est("grpo", group_baseline=True)
@torch.no_grad()
def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    scores: torch.Tensor | None = None,
    metrics: dict | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO outcome advantage: ``(s - mean_g) / (std_g + eps)`` broadcast over the mask.

    ``s`` is the row's outcome score (`outcome_scores`), ``g`` its group (rows
    sharing ``index``, rows without model tokens left out); mean and unbiased
    std are over the group. A group of one has no baseline: advantage 0.
    ``norm_adv_by_std_in_grpo=False`` gives Dr. GRPO's ``s - mean_g``.
    Returns ``(advantages, advantages)``.
    """
    s = outcome_scores(token_level_rewards, scores)
    out = torch.zeros_like(s)
    groups = group_rows(index, response_mask)
    for rows in groups.values():
        if len(rows) > 1:
            group = s[rows]
            centred = group - group.mean()
            out[rows] = centred / (group.std(unbiased=True) + epsilon) if norm_adv_by_std_in_grpo else centred
    record_group_metrics(groups, s, metrics)
    advantages = out.unsqueeze(-1) * response_mask
    return advantages, advantages


@register_adv_est("dr_grpo", group_baseline=True, loss_agg_mode="seq-mean-token-sum-norm")
def compute_dr_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, **kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dr. GRPO: GRPO without the division by the group std (``s - mean_g``).

    Its loss aggregation is ``seq-mean-token-sum-norm`` over the configured
    response budget (set by the config when ``loss_agg_mode`` is ``auto``).
    """
    kwargs["norm_adv_by_std_in_grpo"] = False
    return compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, **kwargs)


@register_adv_est("rloo", group_baseline=True)
@torch.no_grad()
def compute_rloo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    scores: torch.Tensor | None = None,
    metrics: dict | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO: leave-one-out baseline ``s*n/(n-1) - mean_g*n/(n-1)`` (= s minus the mean of the others).

    A group of one has no baseline: advantage 0. Returns ``(advantages, advantages)``.
    """
    s = outcome_scores(token_level_rewards, scores)
    out = torch.zeros_like(s)
    groups = group_rows(index, response_mask)
    for rows in groups.values():
        n = len(rows)
        if n >= 2:
            group = s[rows]
            out[rows] = group * n / (n - 1) - group.mean() * n / (n - 1)
    record_group_metrics(groups, s, metrics)
    advantages = out.unsqueeze(-1) * response_mask
    return advantages, advantages


@register_adv_est("reinforce_plus_plus")
@torch.no_grad()
def compute_reinforce_plus_plus_outcome_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float, **kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++: discounted return-to-go over model tokens, whitened over the batch.

    Backward: ``running = r_t + gamma^{mask_t} * running``; ``G_t = running``.
    A masked token (an observation inside a multi-turn response, or padding)
    neither resets nor discounts the return, so an outcome reward at the last
    turn reaches every earlier turn, discounted once per model token.
    Advantages are ``masked_whiten(G) * mask``. Returns ``(advantages, G)``.
    """
    returns = torch.zeros_like(token_level_rewards)
    running = torch.zeros_like(token_level_rewards[:, 0])
    mask = response_mask.to(token_level_rewards.dtype)
    for t in reversed(range(token_level_rewards.shape[1])):
        discount = mask[:, t] * gamma + (1 - mask[:, t])
        running = token_level_rewards[:, t] + discount * running
        returns[:, t] = running
    advantages = masked_whiten(returns, mask) * mask
    return advantages, returns


@register_adv_est("remax", greedy_baseline=True)
@torch.no_grad()
def compute_remax_outcome_advantage(
    token_level_rewards: torch.Tensor,
    reward_baselines: torch.Tensor,
    response_mask: torch.Tensor,
    scores: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ReMax: the outcome score minus the score of the greedy rollout of the same task.

    ``A_t = (s - b) * mask_t`` with ``s`` the row's outcome score
    (`outcome_scores`) and ``b = reward_baselines`` ``(B,)``, scored by the
    same reward path. A task whose greedy rollout failed has no baseline: the
    trainer marks its rows failed (mask 0), so their advantage is 0.
    Returns ``(advantages, s broadcast over the mask)``.
    """
    s = outcome_scores(token_level_rewards, scores).unsqueeze(-1)
    advantages = (s - reward_baselines.to(s.dtype).unsqueeze(-1)) * response_mask
    return advantages, s * response_mask


# --------------------------------------------------------------------------- KL


KL_ESTIMATORS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")


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
    raise ValueError(f"unknown kl_penalty '{kl_penalty}'; known: {list(KL_ESTIMATORS)}")


_kl_estimate = kl_penalty  # kl_reward's argument of the same name shadows the function


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


def kl_controller(cfg: Any) -> FixedKLController | AdaptiveKLController:
    """The controller ``algorithm.kl_ctrl`` names: ``type`` adaptive (``kl_coef``, ``target_kl``, ``horizon``) or
    fixed (``kl_coef``)."""
    if cfg.type == "adaptive":
        return AdaptiveKLController(cfg.kl_coef, cfg.target_kl, cfg.horizon)
    return FixedKLController(cfg.kl_coef)


def kl_reward(
    data: DataProto, kl_ctrl: FixedKLController | AdaptiveKLController, kl_penalty: str = "kl"
) -> tuple[torch.Tensor, dict[str, float]]:
    """The in-reward KL term ``-beta * KL * mask`` ``(B, T)``, the estimator's input beside the scores (the driver
    adds it: ``token_level_rewards = token_level_scores + kl_reward``).

    Reads ``old_log_probs``, ``ref_log_prob`` and ``response_mask`` from ``data.batch``; the reported KL is the
    mean over rows with model tokens (failed rows have none) of each row's masked mean KL, and it updates
    ``kl_ctrl`` with the number of those rows.
    """
    mask = data.batch["response_mask"]
    kld = _kl_estimate(data.batch["old_log_probs"], data.batch["ref_log_prob"], kl_penalty) * mask
    beta = kl_ctrl.value
    live = mask.sum(dim=-1) > 0
    current_kl = float(masked_mean(kld, mask, axis=-1)[live].mean()) if bool(live.any()) else 0.0
    kl_ctrl.update(current_kl=current_kl, n_steps=int(live.sum()))
    return -beta * kld, {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": beta}


# --------------------------------------------------------------------------- losses


def agg_loss(
    loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str, loss_scale_factor: float | None = None
) -> torch.Tensor:
    """Reduce a ``(B, T)`` loss to a scalar; rows without any unmasked token (failed rows) never count.

    With ``R`` the rows that have a masked-in token:
    ``token-mean``: ``sum(L*m) / sum(m)``; ``seq-mean-token-sum``: mean over
    ``R`` of ``sum_t L*m``; ``seq-mean-token-mean``: mean over ``R`` of the
    row's masked mean; ``seq-mean-token-sum-norm`` (Dr. GRPO): mean over ``R``
    of ``sum_t L*m / C`` with ``C = loss_scale_factor``, a constant (the
    configured response budget; ``T`` when not given). With no such row the
    loss is ``sum(L*m)`` (= 0, keeping the graph).
    """
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg_mode '{loss_agg_mode}'; known: {list(LOSS_AGG_MODES)}")
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    tokens = loss_mask.sum(dim=-1)
    has_tokens = tokens > 0
    if not bool(has_tokens.any()):
        return (loss_mat * loss_mask).sum()
    row_sums = masked_sum(loss_mat, loss_mask, axis=-1)[has_tokens]
    if loss_agg_mode == "seq-mean-token-sum":
        return row_sums.mean()
    if loss_agg_mode == "seq-mean-token-mean":
        return (row_sums / tokens[has_tokens]).mean()
    scale = float(loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    return (row_sums / scale).mean()


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
    loss_scale_factor: float | None = None,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate with dual clip for negative advantages.

    ``ratio = exp(lp - old)`` (the log-ratio is clamped to [-20, 20] before exp
    for numerical safety); ``l1 = -A * ratio``;
    ``l2 = -A * clamp(ratio, 1 - low, 1 + high)``; ``c1 = max(l1, l2)``;
    ``c2 = min(-A * clip_ratio_c, c1)``; loss = ``agg(w * where(A < 0, c2, c1))``
    with ``w = token_weights`` (e.g. truncated importance weights, see
    `truncated_is_weights`; 1 when None). ``low``/``high`` default to ``cliprange``.

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
    if token_weights is not None:
        losses = losses * token_weights
    pg_loss = agg_loss(losses, response_mask, loss_agg_mode, loss_scale_factor)
    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower


@torch.no_grad()
def truncated_is_weights(old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance sampling between the rollout engine and the trainer:
    ``w_t = min(exp(old_t - rollout_t), cap)``, correcting for the engine's
    numerics (or a stale policy) sampling from a slightly different distribution."""
    return torch.exp(torch.clamp(old_log_prob - rollout_log_prob, max=20.0)).clamp(max=cap)


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


def entropy_from_log_probs(log_p: torch.Tensor) -> torch.Tensor:
    """Entropy of a distribution given by its log-probabilities over the last dim: ``H = -sum_v p_v log p_v``."""
    return -(log_p.exp() * log_p).sum(dim=-1)
