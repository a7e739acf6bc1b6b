"""The policy: log-probs of response tokens and the PPO update (formulas in `core_algos`)."""

from __future__ import annotations

import dataclasses

import torch

from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.utils.torch_functional import autocast, filter_logits, forward_logits_at, logprobs_from_logits, scatter_columns
from verl.workers.config import ActorConfig
from verl.workers.trainable import TrainableModule


class PPOActor(TrainableModule):
    """Log-probs (``compute_log_prob``) and the clipped-surrogate update (``update_policy``)."""

    config: ActorConfig

    def __init__(self, module, optimizer, scheduler, config: ActorConfig, device: str, mixed_precision: str):
        """``mixed_precision`` is the resolved autocast dtype (``float32`` for none), never ``auto``."""
        if config.loss_agg_mode == "auto":
            config = dataclasses.replace(config, loss_agg_mode="token-mean")
        super().__init__(module, optimizer, scheduler, device, mixed_precision, config.grad_clip)
        self.config = config

    def _logits_to_outputs(
        self, mb: DataProto, sampling: dict, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor]]:
        """Log-probs (and entropy) under the distribution the engine sampled from:
        logits / temperature, then the same top-k / top-p filter (``sampling`` holds the three).

        Both are ``(B, T)`` and 0 wherever ``response_mask`` is 0 (observations,
        padding); only columns some row of ``mb`` learns from reach the LM head.
        """
        responses = mb.batch["responses"]
        mask = mb.batch["response_mask"] if "response_mask" in mb.batch else torch.ones_like(responses)
        with autocast(self.device, self.mixed_precision):
            logits, cols = forward_logits_at(
                self.module, mb.batch["input_ids"], mb.batch["attention_mask"], mb.batch["position_ids"], mask
            )
        labels = responses[:, cols]
        logits = filter_logits(logits.float() / sampling["temperature"], sampling["top_k"], sampling["top_p"], keep=labels)
        keep = mask.to(logits.dtype)  # 0 wherever the row does not learn, however the rows were batched
        log_prob = scatter_columns(logprobs_from_logits(logits, labels), cols, responses.shape[1]) * keep
        entropy = None
        if with_entropy:
            entropy = scatter_columns(core_algos.compute_entropy_from_logits(logits), cols, responses.shape[1]) * keep
        return log_prob, entropy, (logits, cols)

    def compute_log_prob(
        self, data: DataProto, sampling: dict, with_entropy: bool, micro_batch_rows: int, max_tokens: int | None
    ) -> dict[str, torch.Tensor]:
        """``log_probs`` (and ``entropys``) of every response token, ``(B, T)``; 0 on padding."""
        self.module.eval()

        def fn(mb: DataProto) -> dict[str, torch.Tensor]:
            log_prob, entropy, _ = self._logits_to_outputs(mb.to(self.device), sampling, with_entropy)
            return {"log_probs": log_prob, **({"entropys": entropy} if with_entropy else {})}

        return self.map_micro_batches(data, fn, micro_batch_rows, max_tokens)

    def update_policy(self, data: DataProto, sampling: dict, seed: int = 0) -> dict[str, float]:
        """PPO epochs over ``data``; needs ``old_log_probs``, ``advantages`` (and ``ref_log_prob`` with a KL
        loss, ``rollout_log_probs`` with truncated importance sampling)."""
        cfg = self.config

        def loss_fn(mb: DataProto) -> tuple[torch.Tensor, dict[str, float]]:
            mask = mb.batch["response_mask"].float()
            want_entropy_grad = cfg.entropy_coeff != 0
            log_prob, entropy, (logits, cols) = self._logits_to_outputs(mb, sampling, with_entropy=want_entropy_grad)
            weights = None
            if cfg.tis_cap is not None:
                weights = core_algos.truncated_is_weights(mb.batch["old_log_probs"], mb.batch["rollout_log_probs"], cfg.tis_cap)
            pg_loss, clipfrac, ppo_kl, clipfrac_lower = core_algos.compute_policy_loss(
                old_log_prob=mb.batch["old_log_probs"],
                log_prob=log_prob,
                advantages=mb.batch["advantages"],
                response_mask=mask,
                cliprange=cfg.clip_ratio,
                cliprange_low=cfg.clip_ratio_low,
                cliprange_high=cfg.clip_ratio_high,
                clip_ratio_c=cfg.clip_ratio_c,
                loss_agg_mode=cfg.loss_agg_mode,
                loss_scale_factor=cfg.loss_scale_factor,
                token_weights=weights,
            )
            if entropy is None:
                with torch.no_grad():
                    entropy = scatter_columns(core_algos.compute_entropy_from_logits(logits.detach()), cols, mask.shape[1]) * mask
            entropy_loss = core_algos.agg_loss(entropy, mask, cfg.loss_agg_mode, cfg.loss_scale_factor)
            loss = pg_loss - cfg.entropy_coeff * entropy_loss
            metrics = {
                "actor/pg_loss": pg_loss.item(),
                "actor/pg_clipfrac": clipfrac.item(),
                "actor/ppo_kl": ppo_kl.item(),
                "actor/pg_clipfrac_lower": clipfrac_lower.item(),
                "actor/entropy": core_algos.masked_mean(entropy.detach(), mask).item(),
            }
            if weights is not None:
                metrics["actor/tis_weight_mean"] = core_algos.masked_mean(weights, mask).item()
            if cfg.use_kl_loss:
                kld = core_algos.kl_penalty(log_prob, mb.batch["ref_log_prob"], cfg.kl_loss_type)
                kl_loss = core_algos.agg_loss(kld, mask, cfg.loss_agg_mode, cfg.loss_scale_factor)
                loss = loss + cfg.kl_loss_coef * kl_loss
                metrics["actor/kl_loss"] = kl_loss.item()
                metrics["actor/kl_coef"] = cfg.kl_loss_coef
            return loss, metrics

        return self.run_update(data, loss_fn, cfg, seed, metric_prefix="actor")
