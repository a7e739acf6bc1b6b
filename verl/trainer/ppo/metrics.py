"""Batch statistics with verl's metric names (``critic/score/mean``,
``response_length/mean``, ``perf/throughput`` ...)."""

from __future__ import annotations

import torch

from verl.core_algos import masked_mean
from verl.protocol import DataProto


def _stats(prefix: str, values: torch.Tensor) -> dict[str, float]:
    if values.numel() == 0:
        return {}
    values = values.float()
    return {
        f"{prefix}/mean": float(values.mean()),
        f"{prefix}/max": float(values.max()),
        f"{prefix}/min": float(values.min()),
    }


def compute_data_metrics(batch: DataProto, use_critic: bool, response_budget: int) -> dict[str, float]:
    """Scores, rewards, advantages, returns (and values) over model tokens; prompt / response lengths.

    ``response_length/clip_ratio``: the share of rows with model tokens (failed
    and padding rows have none) cut by the token budget: status ``truncated``
    where the rollout reports a status, else a response of at least
    ``response_budget`` tokens.
    """
    b = batch.batch
    mask = b["response_mask"].float()
    kept = mask.sum(-1) > 0
    T = b["responses"].shape[1]
    prompt_len = b["attention_mask"][:, :-T].sum(-1)
    response_len = b["attention_mask"][:, -T:].sum(-1)
    model_tokens = mask.sum(-1)
    out: dict[str, float] = {}
    out.update(_stats("critic/score", b["token_level_scores"].sum(-1)[kept]))
    out.update(_stats("critic/rewards", b["token_level_rewards"].sum(-1)[kept]))
    token_mask = mask.bool()
    out.update(_stats("critic/advantages", b["advantages"][token_mask]))
    out.update(_stats("critic/returns", b["returns"][token_mask]))
    if use_critic and "values" in b:
        out.update(_stats("critic/values", b["values"][token_mask]))
        residual = (b["returns"] - b["values"])[token_mask]
        if residual.numel() > 1:
            out["critic/vf_explained_var"] = float(1 - residual.var() / (b["returns"][token_mask].var() + 1e-5))
    out.update(_stats("response_length", response_len))
    out.update(_stats("model_tokens", model_tokens))
    out.update(_stats("prompt_length", prompt_len))
    status = batch.non_tensor_batch.get("status")
    if status is not None:
        cut = torch.tensor([s == "truncated" for s in status], dtype=torch.bool)
    else:
        cut = response_len >= response_budget
    out["response_length/clip_ratio"] = float(cut[kept].float().mean()) if bool(kept.any()) else 0.0
    out["critic/kept_trajectories"] = float(kept.sum())
    if "old_log_probs" in b and "rollout_log_probs" in b:
        diff = (b["old_log_probs"] - b["rollout_log_probs"]).abs()
        out["rollout/logprob_diff_vs_trainer"] = float(masked_mean(diff, mask))
    return out


def compute_throughput_metrics(batch: DataProto, step_seconds: float, world_size: int) -> dict[str, float]:
    """Tokens processed per second per rank (prompt + response, all trajectories)."""
    total = float(batch.batch["attention_mask"].sum())
    return {"perf/total_num_tokens": total, "perf/throughput": total / max(step_seconds, 1e-9) / world_size}
