"""The policy: log-probs of response tokens and the PPO update (formulas in `core_algos`)."""

from __future__ import annotations

import dataclasses

import torch

from verl import core_algos
from verl.protocol import DataProto
from verl.utils.torch_functional import autocast
from verl.workers.config import ActorConfig
from verl.workers.token_logprobs import learned_token_logprobs
from verl.workers.trainable import TrainableModule


class PPOActor(TrainableModule):
    """Log-probs (``compute_log_prob``) and the clipped-surrogate update (``update_policy``)."""

    config: ActorConfig

    def __init__(self, module, optimizer, scheduler, config: ActorConfig, device: str, mixed_precision: str):
        """``mixed_precision`` is the resolved autocast dtype (``float32`` for none), never ``auto``."""
        if config.loss_agg_mode == "auto":
            config = dataclasses.replace(config, loss_agg_mode="token-mean")
        super().__init__(module, optimizer, scheduler, device, mixed_precision, config.grad_clip, config.tree_packing)
        self.config = config

    def _token_stats(
        self, mb: DataProto, sampling: dict, with_entropy: bool, entropy_grad: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs (and entropy) ``(B, T)`` under the distribution the engine sampled from
        (``sampling``: temperature, top-k, top-p); 0 wherever ``response_mask`` is 0. A micro-batch
        marked ``tree_packed`` runs as one prefix tree, with the same result."""
        batch = dict(mb.batch)
        batch.setdefault("response_mask", torch.ones_like(batch["responses"]))
        with autocast(self.device, self.mixed_precision):
            return learned_token_logprobs(
                self.module,
                batch,
                sampling,
                with_entropy,
                entropy_grad,
                self.config.logit_chunk_tokens,
                tree_packed=mb.meta_info.get("tree_packed", False),
            )

    def compute_log_prob(
        self, data: DataProto, sampling: dict, with_entropy: bool, micro_batch_rows: int, max_tokens: int | None
    ) -> dict[str, torch.Tensor]:
        """``log_probs`` (and ``entropys``) of every response token, ``(B, T)``; 0 on padding."""
        self.module.eval()

        def fn(mb: DataProto) -> dict[str, torch.Tensor]:
            log_prob, entropy = self._token_stats(mb.to(self.device), sampling, with_entropy)
            return {"log_probs": log_prob, **({"entropys": entropy} if with_entropy else {})}

        return self.map_micro_batches(data, fn, micro_batch_rows, max_tokens)

    def update_policy(self, data: DataProto, sampling: dict, seed: int = 0) -> dict[str, float]:
        """PPO epochs over ``data``; needs ``advantages`` (and ``ref_log_prob`` with a KL loss,
        ``rollout_log_probs`` with truncated importance sampling). Without ``old_log_probs`` the batch
        must make exactly one optimiser step: each token's old log-prob is then its current one, detached
        (the weights that would have recomputed them are these), so the ratio is 1 and nothing clips."""
        cfg = self.config
        if "old_log_probs" not in data.batch.keys() and (
            cfg.ppo_epochs != 1 or len(data) * self.world_size != cfg.ppo_mini_batch_size
        ):
            raise ValueError(
                "update_policy without old_log_probs needs one optimiser step per batch (ppo_epochs 1, one "
                f"mini-batch); got ppo_epochs {cfg.ppo_epochs}, {len(data) * self.world_size} rows, "
                f"mini-batch {cfg.ppo_mini_batch_size}"
            )

        def loss_fn(mb: DataProto) -> tuple[torch.Tensor, dict[str, float]]:
            mask = mb.batch["response_mask"].float()
            log_prob, entropy = self._token_stats(mb, sampling, with_entropy=True, entropy_grad=cfg.entropy_coeff != 0)
            old = mb.batch["old_log_probs"] if "old_log_probs" in mb.batch.keys() else log_prob.detach()
            weights = None
            if cfg.tis_cap is not None:
                weights = core_algos.truncated_is_weights(old, mb.batch["rollout_log_probs"], cfg.tis_cap)
            pg_loss, clipfrac, ppo_kl, clipfrac_lower = core_algos.compute_policy_loss(
                old_log_prob=old,
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
            if (
                "old_log_probs" not in mb.batch.keys() and "rollout_log_probs" in mb.batch.keys()
            ):  # what the driver reports otherwise
                metrics["rollout/logprob_diff_vs_trainer"] = core_algos.masked_mean(
                    (old - mb.batch["rollout_log_probs"]).abs(), mask
                ).item()
            if cfg.use_kl_loss:
                kld = core_algos.kl_penalty(log_prob, mb.batch["ref_log_prob"], cfg.kl_loss_type)
                kl_loss = core_algos.agg_loss(kld, mask, cfg.loss_agg_mode, cfg.loss_scale_factor)
                loss = loss + cfg.kl_loss_coef * kl_loss
                metrics["actor/kl_loss"] = kl_loss.item()
                metrics["actor/kl_coef"] = cfg.kl_loss_coef
            return loss, metrics

        return self.run_update(data, loss_fn, cfg, seed, metric_prefix="actor")
