"""`TrainableModule`: the mini-batch / micro-batch / gradient-accumulation loop shared by actor and critic.

One PPO update over a batch of B rows on this rank::

    for epoch in range(ppo_epochs):
        for mini-batch (ppo_mini_batch_size rows in all, split over the ranks):
            zero grads
            for micro-batch (by rows, or by a token budget):
                loss_mb, metrics_mb = loss_fn(micro-batch)
                backward(loss_mb * w_mb * world_size)
            clip grad norm; optimiser step (skipped when the norm is not finite)
    lr scheduler step (once per update call)

``w_mb`` makes the accumulated gradient equal to the gradient of the loss over
the whole mini-batch, on every rank count: for ``token-mean`` it is the
micro-batch's share of the mini-batch's response tokens (summed over all
ranks), for the ``seq-mean-*`` modes its share of the rows that have a model
token (failed rows count nowhere). FSDP averages gradients over ranks, hence
the ``world_size`` factor.

With tree packing (``tree_packing``: ``on``, or ``auto`` when it pays) the
micro-batches are subtrees of the rows' prefix tree under the token budget
(`verl.utils.prefix_tree.plan_tree_micro_batches`), marked
``meta_info["tree_packed"]`` for the loss function; the rows, and so the
weights above, are the same as the flat path's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from verl.protocol import DataProto
from verl.utils import fsdp_utils
from verl.utils.bf16_rounding import round_linears_stochastically
from verl.utils.memory import release_free_heap
from verl.utils.prefix_tree import plan_tree_micro_batches, use_tree_attention
from verl.utils.torch_functional import plan_micro_batches
from verl.workers.config import UpdateBatchingConfig

LossFn = Callable[[DataProto], tuple[torch.Tensor, dict[str, float]]]

# `tree_packing: auto` packs when the flat plan would run at least this many times the tree's tokens
# (padding included): the packed path ran 4-7% more seconds per token than the flat one on the recorded
# WebShop step (its per-segment attention calls and gathers; docs/performance.md#tree-packing).
TREE_AUTO_MIN_GAIN = 1.1


def padded_tokens(attention_mask: torch.Tensor, plan: list[np.ndarray]) -> int:
    """Tokens the flat path runs for ``plan``: each micro-batch's rows times the columns any of them uses."""
    total = 0
    for rows in plan:
        used = attention_mask[torch.as_tensor(rows)].bool().any(dim=0).nonzero().flatten()
        total += len(rows) * (int(used[-1]) - int(used[0]) + 1)
    return total


def _global_sum(value: float, device: str) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t)
    return float(t.item())


def _global_sum_dict(values: dict[str, float], device: str) -> dict[str, float]:
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t)
    return dict(zip(keys, t.tolist()))


def _global_max(value: int, device: str) -> int:
    t = torch.tensor([value], dtype=torch.int64, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def _masked_copy(mb: DataProto, mask_key: str) -> DataProto:
    """One row of ``mb`` with its loss mask zeroed: a micro-batch that runs the collectives and adds nothing."""
    filler = mb[[0]]
    filler.batch[mask_key] = torch.zeros_like(filler.batch[mask_key])
    return filler


class TrainableModule:
    """An FSDP-sharded module with its optimiser, scheduler and the PPO update loop."""

    def __init__(
        self,
        module: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None,
        device: str,
        mixed_precision: str,
        grad_clip: float = 1.0,
        tree_packing: str = "off",
        release_heap: bool = True,
    ):
        """``release_heap``: give the freed heap back to the OS after every update and no-grad pass
        (`verl.utils.memory.release_free_heap`), so that a worker sharing the box with others holds only what
        it uses between calls; the next call faults those pages in again (a packed fp32 SFT step ran 1.25x
        longer, docs/performance.md), so a process alone on the box keeps them.

        ``tree_packing``: ``off``, ``on`` or ``auto``. With ``on`` or ``auto`` the module's attention becomes
        ``tree_sdpa`` (`verl.utils.prefix_tree.use_tree_attention`); on a model that runs another attention
        than SDPA ``auto`` is ``off`` and ``on`` raises ``ValueError``."""
        self.module, self.optimizer, self.scheduler = module, optimizer, scheduler
        self.device, self.mixed_precision, self.grad_clip = device, mixed_precision, grad_clip
        if mixed_precision == "bfloat16":
            round_linears_stochastically(module)  # autocast's rounding to nearest would hide small updates
        if tree_packing != "off":
            try:
                use_tree_attention(module)
            except ValueError:
                if tree_packing == "on":
                    raise
                tree_packing = "off"
        self.tree_packing = tree_packing
        self.release_heap = release_heap
        self.token_counts = {"flat": 0, "run": 0}  # tokens the flat path would run / that ran, since the last reset
        self.world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.rank = dist.get_rank() if dist.is_initialized() else 0

    def take_token_counts(self, name: str) -> dict[str, float]:
        """``perf/<name>_tokens_flat`` and ``_tokens_run`` since the last call (what the flat path would have
        run, padding included, and what ran), then starts counting again."""
        counts = {f"perf/{name}_tokens_{k}": float(v) for k, v in self.token_counts.items()}
        self.token_counts = {"flat": 0, "run": 0}
        return counts

    def plan(self, data: DataProto, max_rows: int, max_tokens: int | None) -> list[tuple[np.ndarray, DataProto]]:
        """``data``'s micro-batches (their row positions and rows), flat or tree-packed by ``tree_packing``,
        each marked ``meta_info["tree_packed"]``; adds to `token_counts`."""
        mask = data.batch["attention_mask"]
        flat = plan_micro_batches(mask, max_rows, max_tokens)
        flat_tokens = padded_tokens(mask, flat)
        plan, packed, run = flat, False, flat_tokens
        if self.tree_packing != "off":
            tree, sizes = plan_tree_micro_batches(data.batch["input_ids"], mask, max_rows, max_tokens)
            if self.tree_packing == "on" or flat_tokens >= TREE_AUTO_MIN_GAIN * sum(sizes):
                plan, packed, run = tree, True, sum(sizes)
        self.token_counts["flat"] += flat_tokens
        self.token_counts["run"] += run
        micro = []
        for rows in plan:
            mb = data[rows]
            mb.meta_info["tree_packed"] = packed
            micro.append((rows, mb))
        return micro

    # ----------------------------------------------------------------- no-grad passes
    @torch.no_grad()
    def map_micro_batches(
        self, data: DataProto, fn: Callable[[DataProto], dict[str, torch.Tensor]], max_rows: int, max_tokens: int | None
    ) -> dict[str, torch.Tensor]:
        """Apply ``fn`` (returning per-row tensors) to micro-batches and reassemble rows in order.

        Every rank runs the same number of forward passes (FSDP all-gathers in
        each): a rank with fewer micro-batches repeats its first row and drops the result.
        """
        outputs: dict[str, torch.Tensor] = {}
        micro = self.plan(data, max_rows, max_tokens)
        for _ in range(_global_max(len(micro), self.device) - len(micro)):
            fn(data[[0]])
        for rows, mb in micro:
            result = fn(mb)
            for key, value in result.items():
                if key not in outputs:
                    outputs[key] = torch.zeros((len(data), *value.shape[1:]), dtype=value.dtype)
                outputs[key][torch.as_tensor(rows)] = value.detach().cpu()
        if self.release_heap:
            release_free_heap()
        return outputs

    # ----------------------------------------------------------------- updates
    def _weight_basis(self, mb: DataProto, mask_key: str, loss_agg_mode: str) -> float:
        mask = mb.batch[mask_key]
        if loss_agg_mode == "token-mean":
            return float(mask.sum())
        return float((mask.sum(dim=-1) > 0).sum())  # seq-mean-*: the rows that have a model token

    def run_update(
        self,
        data: DataProto,
        loss_fn: LossFn,
        cfg: UpdateBatchingConfig,
        seed: int,
        metric_prefix: str,
        mask_key: str = "response_mask",
    ) -> dict[str, float]:
        """Run PPO epochs over ``data`` (this rank's rows) and return averaged metrics.

        ``cfg`` (the actor or critic config) supplies the batching fields and ``loss_agg_mode``.
        """
        mini_batch_size, epochs, loss_agg_mode = cfg.ppo_mini_batch_size, cfg.ppo_epochs, cfg.loss_agg_mode
        micro_batch_rows = cfg.ppo_micro_batch_size_per_gpu
        max_tokens = cfg.ppo_max_token_len_per_gpu if cfg.use_dynamic_bsz else None
        if mini_batch_size % self.world_size:
            raise ValueError(
                f"{metric_prefix} mini-batch size {mini_batch_size} does not divide over {self.world_size} ranks"
            )
        per_rank = mini_batch_size // self.world_size
        if len(data) % per_rank:
            raise ValueError(
                f"{metric_prefix}: {len(data)} rows on rank {self.rank} do not split into mini-batches of {per_rank} "
                f"(mini-batch {mini_batch_size} over {self.world_size} ranks)"
            )
        self.module.train()
        sums: dict[str, float] = {}
        steps = 0
        for epoch in range(epochs):
            for mini in data.make_iterator(per_rank, epochs=1, seed=seed + epoch, shuffle=cfg.shuffle):
                micro = [mb for _, mb in self.padded_plan(mini, micro_batch_rows, max_tokens, mask_key)]
                step_metrics = self._optimiser_step(micro, loss_fn, loss_agg_mode, metric_prefix, mask_key)
                if step_metrics is not None:
                    for key, value in step_metrics.items():
                        sums[key] = sums.get(key, 0.0) + value
                    steps += 1
        return self._end_update(sums, steps, metric_prefix)

    def run_planned_step(
        self, micro: list[DataProto], loss_fn: LossFn, cfg: UpdateBatchingConfig, metric_prefix: str
    ) -> dict[str, float]:
        """`run_update` for one epoch of one mini-batch whose micro-batches (`padded_plan`) are given: the
        optimiser step over them, with ``loss_fn`` as in `run_update`."""
        metrics = self._optimiser_step(micro, loss_fn, cfg.loss_agg_mode, metric_prefix, "response_mask")
        return self._end_update(metrics or {}, int(metrics is not None), metric_prefix)

    def padded_plan(
        self, data: DataProto, max_rows: int, max_tokens: int | None, mask_key: str
    ) -> list[tuple[np.ndarray | None, DataProto]]:
        """`plan`'s micro-batches, then fillers (row positions None): copies of the first one's first row with
        ``mask_key`` zeroed, until every rank has as many (dynamic batching can give ranks different counts;
        FSDP needs the same number of passes)."""
        micro: list[tuple[np.ndarray | None, DataProto]] = list(self.plan(data, max_rows, max_tokens))
        fillers = _global_max(len(micro), self.device) - len(micro)
        return micro + [(None, _masked_copy(micro[0][1], mask_key)) for _ in range(fillers)]

    def _optimiser_step(
        self, micro: list[DataProto], loss_fn: LossFn, loss_agg_mode: str, metric_prefix: str, mask_key: str
    ) -> dict[str, float] | None:
        """Accumulate the mini-batch's gradient over ``micro`` and step; its metrics (None: no token learns)."""
        tokens = [float(m.batch[mask_key].sum()) for m in micro]
        bases = [self._weight_basis(m, mask_key, loss_agg_mode) for m in micro]
        token_total = _global_sum(sum(tokens), self.device)
        basis_total = _global_sum(sum(bases), self.device)
        if token_total == 0:
            return None
        self.optimizer.zero_grad(set_to_none=True)
        metrics: dict[str, float] = {}
        for mb, n_tokens, basis in zip(micro, tokens, bases):
            loss, mb_metrics = loss_fn(mb.to(self.device))
            loss_weight = basis / basis_total
            (loss * (loss_weight * self.world_size)).backward()
            for key, value in mb_metrics.items():
                # "*loss" metrics aggregate like the loss itself; the rest are token-weighted means
                weight = loss_weight if key.endswith("loss") else n_tokens / token_total
                metrics[key] = metrics.get(key, 0.0) + value * weight
        metrics = _global_sum_dict(metrics, self.device)
        metrics[f"{metric_prefix}/grad_norm"] = self.clip_and_step()
        return metrics

    def _end_update(self, sums: dict[str, float], steps: int, metric_prefix: str) -> dict[str, float]:
        """Free the spent gradients, step the scheduler, and average the optimiser steps' metrics."""
        self.optimizer.zero_grad(set_to_none=True)  # the gradients are spent: free them until the next update
        if self.release_heap:
            release_free_heap()  # and give the step's freed activations back to the OS
        if self.scheduler is not None:
            self.scheduler.step()
        out = {k: v / max(steps, 1) for k, v in sums.items()}
        out[f"{metric_prefix}/lr"] = self.optimizer.param_groups[0]["lr"]
        return out

    def clip_and_step(self) -> float:
        """Clip the gradients' global norm to ``grad_clip`` and take the optimiser step (skipped, gradients dropped,
        when the norm is not finite); returns the norm before clipping."""
        params = [p for p in self.module.parameters() if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=self.grad_clip)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        norm = float(norm)
        if np.isfinite(norm):
            self.optimizer.step()
        else:
            self.optimizer.zero_grad(set_to_none=True)
        return norm

    # ----------------------------------------------------------------- checkpoints
    def save(self, folder: str, name: str) -> None:
        """Write ``<name>.pt`` (model, optimiser, scheduler; rank 0) and this rank's RNG state."""
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        model_sd, optim_sd = fsdp_utils.full_train_state(self.module, self.optimizer)
        if self.rank == 0:
            state = {
                "model": model_sd,
                "optimizer": optim_sd,
                "scheduler": self.scheduler.state_dict() if self.scheduler else None,
            }
            tmp = path / f".{name}.pt.tmp"
            torch.save(state, tmp)
            os.replace(tmp, path / f"{name}.pt")
        torch.save(fsdp_utils.rng_state(), path / f"{name}_rng_rank{self.rank}.pt")
        if dist.is_initialized():
            dist.barrier()

    def load(self, folder: str, name: str) -> None:
        """Restore what `save` wrote (model and optimiser broadcast from rank 0)."""
        path = Path(folder)
        if not (path / f"{name}.pt").is_file():
            raise FileNotFoundError(f"no {name}.pt in {folder}")
        state = (
            torch.load(path / f"{name}.pt", weights_only=False)
            if self.rank == 0
            else {"model": {}, "optimizer": {}, "scheduler": None}
        )
        fresh = [state["optimizer"] is None]  # saved before the first step: every rank loads no optimiser state
        if self.world_size > 1:
            dist.broadcast_object_list(fresh, src=0)
        fsdp_utils.load_full_train_state(
            self.module, self.optimizer, state["model"], None if fresh[0] else state["optimizer"]
        )
        if self.scheduler is not None:
            sched = state["scheduler"]
            if self.world_size > 1:
                box = [sched]
                dist.broadcast_object_list(box, src=0)
                sched = box[0]
            self.scheduler.load_state_dict(sched)
        rng_file = path / f"{name}_rng_rank{self.rank}.pt"
        if rng_file.is_file():
            fsdp_utils.set_rng_state(torch.load(rng_file, weights_only=False))
