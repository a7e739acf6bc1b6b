"""The value model (a causal-LM backbone with a scalar head) and its clipped value-loss update."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from verl import core_algos
from verl.protocol import DataProto
from verl.utils.prefix_tree import pack_rows
from verl.utils.torch_functional import autocast, forward_response, pad_right
from verl.workers.config import CriticConfig
from verl.workers.trainable import TrainableModule


class ValueModel(nn.Module):
    """``V(s_t) = w^T h_t + b`` on top of the backbone's last hidden state; the head starts at zero."""

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_pretrained(cls, path: str, attn_implementation: str = "sdpa") -> "ValueModel":
        from transformers import AutoModel

        backbone = AutoModel.from_pretrained(path, dtype=torch.float32, attn_implementation=attn_implementation)
        return cls(backbone, backbone.config.hidden_size)

    def forward(self, input_ids, attention_mask, position_ids, use_cache: bool = False, **kwargs) -> torch.Tensor:
        """``kwargs`` reach the backbone's attention (``packed_tree``, `verl.utils.prefix_tree`)."""
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=use_cache, **kwargs
        ).last_hidden_state
        return self.value_head(hidden).squeeze(-1)


class PPOCritic(TrainableModule):
    """Values of the states before each response token, and the clipped value-loss update."""

    def __init__(self, module, optimizer, scheduler, config: CriticConfig, mixed_precision: str):
        super().__init__(
            module, optimizer, scheduler, config.device, mixed_precision, config.grad_clip, config.tree_packing
        )
        self.config = config
        self._kept: KeptForward | None = None

    def _values(self, mb: DataProto) -> torch.Tensor:
        """``V`` of the state before each response token, ``(B, T)``; a ``tree_packed`` micro-batch runs
        each shared state once and gathers its value to every row through it."""
        input_ids, attention_mask = mb.batch["input_ids"], mb.batch["attention_mask"]
        L, T = input_ids.shape[1], mb.batch["responses"].shape[1]
        if mb.meta_info.get("tree_packed"):
            tree = pack_rows(input_ids, attention_mask)
            with autocast(self.device, self.mixed_precision):
                packed = self.module(**tree.model_inputs())[0]
            before = tree.index[:, L - T - 1 : L - 1].clamp_min(
                0
            )  # response token t is predicted from column L - T - 1 + t
            return packed.float()[before] * mb.batch["response_mask"]
        with autocast(self.device, self.mixed_precision):
            values, _ = forward_response(self.module, input_ids, attention_mask, mb.batch["position_ids"], T)
        return pad_right(values.float(), T) * mb.batch["response_mask"]

    def compute_values(self, data: DataProto, keep_graph: bool = False) -> torch.Tensor:
        """``values`` ``(B, T)``, 0 outside the response mask.

        With ``keep_graph`` (the next `update_critic` makes one optimiser step over exactly these rows) the
        forward runs as the update's would, with gradients, and is kept: that update backpropagates through
        it instead of running the same weights over the same rows again, so its ``vpreds`` are these values.
        The kept graph holds what the update's backward needs of every micro-batch at once: with
        recomputation each layer's input, without it every activation. So without recomputation the forward
        is kept only when the update's plan is one micro-batch (the count `padded_plan` gives every rank);
        otherwise it runs without gradients and the update runs its own forward, one micro-batch at a time.
        """
        cfg = self.config
        max_tokens = cfg.ppo_max_token_len_per_gpu if cfg.use_dynamic_bsz else None
        self._kept = None  # a forward kept for an update that never came is dropped here
        if keep_graph:
            planned = self.padded_plan(data, cfg.ppo_micro_batch_size_per_gpu, max_tokens, "response_mask")
            if cfg.model.enable_gradient_checkpointing or len(planned) == 1:
                return self._values_kept_for_update(data, planned)
        self.module.eval()
        out = self.map_micro_batches(
            data, lambda mb: {"values": self._values(mb.to(self.device))}, cfg.ppo_micro_batch_size_per_gpu, max_tokens
        )
        return out["values"]

    def _values_kept_for_update(
        self, data: DataProto, planned: list[tuple[np.ndarray | None, DataProto]]
    ) -> torch.Tensor:
        self.module.train()
        values = torch.zeros(data.batch["responses"].shape)
        micro = []
        for rows, mb in planned:
            vpreds = self._values(mb.to(self.device))
            if rows is None:  # a filler: a copy of the first row that learns nothing
                rows = planned[0][0][:1]
            else:
                values[torch.as_tensor(rows)] = vpreds.detach().cpu()
            micro.append((rows, mb, vpreds))
        self._kept = KeptForward(data.batch["input_ids"], data.batch["attention_mask"], micro, self.token_counts)
        self.token_counts = {"flat": 0, "run": 0}  # they count for the update that uses this forward
        return values

    def update_critic(self, data: DataProto, seed: int = 0) -> dict[str, float]:
        """Value-loss epochs over ``data``; needs ``values`` (old) and ``returns``. When `compute_values`
        kept its forward over these same rows, the one optimiser step backpropagates through it
        (``critic/values_forward_reused`` 1)."""
        cfg = self.config
        kept, self._kept = self._kept, None
        reused = kept is not None and kept.matches(data)

        def loss_fn(mb: DataProto) -> tuple[torch.Tensor, dict[str, float]]:
            mask = mb.batch["response_mask"].float()
            vpreds = mb.meta_info.pop("vpreds") if reused else self._values(mb)
            vf_loss, vf_clipfrac = core_algos.compute_value_loss(
                vpreds, mb.batch["returns"], mb.batch["values"], mask, cfg.cliprange_value, cfg.loss_agg_mode
            )
            return vf_loss, {
                "critic/vf_loss": vf_loss.item(),
                "critic/vf_clipfrac": vf_clipfrac.item(),
                "critic/vpred_mean": core_algos.masked_mean(vpreds.detach(), mask).item(),
            }

        if not reused:
            metrics = self.run_update(data, loss_fn, cfg, seed, metric_prefix="critic")
        else:
            micro = []
            for rows, mb, vpreds in kept.micro:
                index = torch.as_tensor(rows)
                mb.batch.update({k: data.batch[k][index].to(self.device) for k in ("returns", "values")})
                mb.meta_info["vpreds"] = vpreds
                micro.append(mb)
            self.token_counts = {k: self.token_counts[k] + kept.token_counts[k] for k in kept.token_counts}
            metrics = self.run_planned_step(micro, loss_fn, cfg, metric_prefix="critic")
        metrics["critic/values_forward_reused"] = float(reused)
        return metrics


@dataclass
class KeptForward:
    """The values pass's forward, kept for the update: its rows' inputs, its micro-batches (row positions,
    rows, ``vpreds`` with their graph) and the tokens it ran."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    micro: list[tuple[np.ndarray, DataProto, torch.Tensor]]
    token_counts: dict[str, int]

    def matches(self, data: DataProto) -> bool:
        """Whether ``data`` holds the rows this forward ran, in the same order."""
        return torch.equal(self.input_ids, data.batch["input_ids"]) and torch.equal(
            self.attention_mask, data.batch["attention_mask"]
        )
