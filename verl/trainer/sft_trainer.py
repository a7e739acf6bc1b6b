"""Supervised fine-tuning on token-id samples with a loss mask: the warm start before RL.

A sample is ``input_ids`` (a whole episode: prompt, model turns, observations)
and ``loss_mask`` (1 on the tokens the model should learn to write, i.e. its
turns). The loss is the token-mean negative log-likelihood over the masked
tokens::

    L = - sum_t m_{t+1} log p(x_{t+1} | x_{<=t}) / sum_t m_{t+1}

The model, sharding and update loop are the actor's: fp32 master weights under
FSDP2 (gloo on CPU, nccl on CUDA), autocast in the resolved dtype
(`verl.utils.precision`), micro-batches by rows or by a token budget with exact
gradient accumulation (`TrainableModule.run_update`). Each optimiser step takes
``train.batch_size`` samples; the dev loss is measured every ``eval_freq``
steps and after every epoch (and of the base model first with
``eval_before_train``), the best dev-loss weights are kept as a Hugging
Face folder (``<output_dir>/huggingface``, usable as
``actor_rollout_ref.model.path``), and training stops early after ``patience``
evaluations without improvement. With ``model.lora_rank`` > 0 only LoRA adapters
train (`verl.utils.lora`) and the folder holds the merged weights
``W + (alpha / r) B A``, so an RL run from it starts (and keeps its reference) at
the warm start.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from verl.protocol import DataProto
from verl.trainer.fit_loop import BestSoFar, FitTrainer, LoopConfig, check_loop, run_epochs, steps_per_epoch
from verl.utils import fsdp_utils
from verl.utils.lora import apply_lora, check_target_modules
from verl.utils.prefix_tree import pack_rows
from verl.utils.torch_functional import autocast, position_ids_from_mask
from verl.utils.typed_config import ConfigError, defaults_from
from verl.workers.config import ModelConfig, OptimConfig, UpdateBatchingConfig, check_tree_packing
from verl.workers.token_logprobs import head_stats_at, tree_token_stats
from verl.workers.trainable import TrainableModule

MASK_KEY = "target_mask"  # target_mask[:, t] = loss_mask[:, t + 1]: the token predicted at position t is learned


@dataclass
@defaults_from("sft_trainer", "data")
class SFTDataConfig:
    train_files: str
    val_files: str
    max_length: int  # longer samples are dropped (and counted)


@dataclass
@defaults_from("sft_trainer", "train")
class SFTTrainConfig(LoopConfig):
    micro_batch_size: int
    use_dynamic_bsz: bool


@dataclass
@defaults_from("sft_trainer", "trainer")
class RunConfig:
    """Where an offline trainer (SFT, reward model) runs and logs; nested in a config, it takes that config's
    ``trainer`` section."""

    project_name: str
    experiment_name: str
    device: str
    num_threads: int
    output_dir: str
    logger: list[str]


@dataclass
@defaults_from("sft_trainer")
class SFTConfig:
    """The whole of ``sft_trainer.yaml``, typed; its defaults are the YAML's values."""

    data: SFTDataConfig
    model: ModelConfig
    optim: OptimConfig
    train: SFTTrainConfig
    trainer: RunConfig

    def validate(self, where: str) -> None:
        positive = ("batch_size", "micro_batch_size", "max_token_len", "epochs", "patience")
        check_loop(where, self.train, self.model.path, positive)
        if self.model.lora_rank:
            check_target_modules(self.model.path, self.model.target_modules, f"{where}.model")
        check_tree_packing(self.train.tree_packing, self.model.attn_implementation, f"{where}.train")

    def check_files(self, where: str) -> None:
        """The data files exist (`validate` leaves them out:
        the warm start checks its SFT config before it writes them)."""
        for key in ("train_files", "val_files"):
            if not Path(getattr(self.data, key)).is_file():
                raise ConfigError(
                    f"{where}.data.{key}={getattr(self.data, key)!r} does not exist (run scripts/make_sft_data.py)"
                )


def read_samples(path: str, max_length: int) -> tuple[list[list[int]], list[list[int]], int]:
    """``(input_ids, loss_mask, dropped)`` from a parquet of samples; samples longer than ``max_length`` are dropped."""
    frame = pd.read_parquet(path)
    missing = [c for c in ("input_ids", "loss_mask") if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}; has {list(frame.columns)}")
    ids, masks, dropped = [], [], 0
    for i, (x, m) in enumerate(zip(frame["input_ids"], frame["loss_mask"])):
        x, m = [int(v) for v in x], [int(v) for v in m]
        if len(x) != len(m):
            raise ValueError(f"{path} row {i}: {len(x)} input ids but {len(m)} loss-mask entries")
        if len(x) > max_length:
            dropped += 1
            continue
        ids.append(x)
        masks.append(m)
    if not ids:
        raise ValueError(f"{path}: no sample of at most {max_length} tokens")
    return ids, masks, dropped


def pack_samples(ids: list[list[int]], masks: list[list[int]], pad_id: int) -> DataProto:
    """Right-padded ``input_ids``, ``attention_mask``, ``position_ids`` and the shifted ``target_mask``."""
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(ids), width), dtype=torch.long)
    target = torch.zeros((len(ids), width), dtype=torch.long)
    for i, (x, m) in enumerate(zip(ids, masks)):
        input_ids[i, : len(x)] = torch.tensor(x)
        attention[i, : len(x)] = 1
        target[i, : len(x) - 1] = torch.tensor(m[1:])
    return DataProto.from_dict(
        {
            "input_ids": input_ids,
            "attention_mask": attention,
            "position_ids": position_ids_from_mask(attention),
            MASK_KEY: target,
        }
    )


PLAIN = {"temperature": 1.0, "top_k": -1, "top_p": 1.0}  # the model's own distribution


def token_nll(
    module: torch.nn.Module, mb: DataProto, device: str, dtype: str, chunk_tokens: int = 512
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row ``(B,)``: the summed NLL of the learned next tokens, and how many there are.

    Only learned positions go through the LM head, in chunks (`head_stats_at`): in agent
    episodes the model's turns are a small part of each sequence. A micro-batch marked
    ``tree_packed`` runs as one prefix tree (`verl.utils.prefix_tree`): a token that several
    samples share is scored once and counted in each of them.
    """
    if mb.meta_info.get("tree_packed"):
        return _tree_token_nll(module, mb, device, dtype, chunk_tokens)
    width = int(mb.batch["attention_mask"].sum(dim=-1).max())
    b = {k: v[:, :width].to(device) for k, v in mb.batch.items()}
    target = b[MASK_KEY].bool()
    keep = torch.nonzero(target.any(dim=0)).squeeze(-1)
    picked = target[:, keep]
    if not picked.any():  # nothing to learn here: one position keeps the graph, with weight 0
        keep = torch.zeros(1, dtype=torch.long, device=target.device)
        picked = torch.zeros(target.shape[0], 1, dtype=torch.bool, device=target.device)
        picked[0, 0] = True
    labels = torch.roll(b["input_ids"], shifts=-1, dims=1)[:, keep][picked]  # position t predicts token t + 1
    inputs = {k: b[k] for k in ("input_ids", "attention_mask", "position_ids")}
    with autocast(device, dtype):
        stats = head_stats_at(
            module, inputs, keep, picked, labels, PLAIN, with_entropy=False, chunk_tokens=chunk_tokens
        )
    weight = target[:, keep][picked].float()
    rows = picked.nonzero(as_tuple=True)[0]
    zeros = torch.zeros(target.shape[0], device=stats.device)
    return zeros.index_add(0, rows, -stats[:, 0] * weight), zeros.index_add(0, rows, weight)


def _tree_token_nll(
    module: torch.nn.Module, mb: DataProto, device: str, dtype: str, chunk_tokens: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """`token_nll` over the micro-batch's prefix tree: each learned tree token's log-prob once,
    added to every row through it."""
    batch = {k: v.to(device) for k, v in mb.batch.items()}
    tree = pack_rows(batch["input_ids"], batch["attention_mask"])
    rows, cols = batch[MASK_KEY].bool().nonzero(as_tuple=True)  # position t predicts token t + 1
    with autocast(device, dtype):
        stats = tree_token_stats(
            module, tree, tree.index[rows, cols + 1], PLAIN, with_entropy=False, chunk_tokens=chunk_tokens
        )
    zeros = torch.zeros(len(tree.index), device=stats.device)
    return zeros.index_add(0, rows, -stats[:, 0]), zeros.index_add(0, rows, torch.ones_like(stats[:, 0]))


def fit_batch(t: SFTTrainConfig, samples: int, world_size: int) -> SFTTrainConfig:
    """``t``, or with fewer samples than ``train.batch_size`` one step an epoch over all of them (as many as
    ``world_size`` ranks split evenly)."""
    if samples >= t.batch_size:
        return t
    batch_size = samples - samples % world_size
    if batch_size == 0:
        raise ConfigError(f"{samples} training sample(s) cannot be split over {world_size} ranks")
    print(
        f"[sft] {samples} training samples, fewer than train.batch_size={t.batch_size}: "
        f"each epoch is one step over {batch_size}",
        flush=True,
    )
    return replace(t, batch_size=batch_size)


class SFTTrainer(FitTrainer):
    """One rank of SFT (run it with torchrun for several ranks; world size 1 by default)."""

    config: SFTConfig

    def _build(self) -> TrainableModule:
        from transformers import AutoModelForCausalLM

        cfg = self.config
        self.start(f"sft rank {self.rank}")
        module = AutoModelForCausalLM.from_pretrained(
            cfg.model.path, dtype=torch.float32, attn_implementation=cfg.model.attn_implementation
        )
        if cfg.model.lora_rank:
            apply_lora(module, cfg.model.lora_rank, cfg.model.lora_alpha, cfg.model.target_modules, seed=cfg.train.seed)
        return self.trainable(module)

    def _loss(self, mb: DataProto) -> tuple[torch.Tensor, dict[str, float]]:
        nll, tokens = token_nll(self.model.module, mb, self.model.device, self.dtype)
        loss = nll.sum() / tokens.sum().clamp_min(1.0)
        return loss, {"sft/train_loss": loss.item()}

    @torch.no_grad()
    def dev_loss(self, model: TrainableModule, data: DataProto) -> float:
        """Token-mean NLL over every masked token of ``data``."""
        model.module.eval()
        t = self.config.train

        def fn(mb: DataProto) -> dict[str, torch.Tensor]:
            nll, tokens = token_nll(model.module, mb, model.device, self.dtype)
            return {"nll": nll[:, None].cpu(), "tokens": tokens[:, None].cpu()}

        out = model.map_micro_batches(data, fn, t.micro_batch_size, t.max_token_len if t.use_dynamic_bsz else None)
        return float(out["nll"].sum() / out["tokens"].sum().clamp_min(1.0))

    def fit(self) -> dict:
        """Train, keep the best dev-loss weights as an HF folder, and return a summary (also ``sft_summary.json``)."""
        from transformers import AutoTokenizer

        from verl.utils.plot import SFT_PANELS, plot_metrics
        from verl.utils.tracking import Tracking, progress_bar

        cfg, t = self.config, self.config.train
        tokenizer = AutoTokenizer.from_pretrained(cfg.model.path)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        train_ids, train_masks, dropped = read_samples(cfg.data.train_files, cfg.data.max_length)
        dev = pack_samples(*read_samples(cfg.data.val_files, cfg.data.max_length)[:2], pad_id)
        if t.batch_size % self.world_size:
            raise ConfigError(f"train.batch_size={t.batch_size} must divide over {self.world_size} ranks")
        t = fit_batch(t, len(train_ids), self.world_size)
        cfg.optim.total_training_steps = steps_per_epoch(len(train_ids), t.batch_size) * t.epochs
        model = self.model = self._build()
        out_dir = Path(cfg.trainer.output_dir)
        tracker = Tracking(
            cfg.trainer.project_name,
            cfg.trainer.experiment_name,
            cfg.trainer.logger if self.rank == 0 else [],
            str(out_dir),
            total_steps=cfg.optim.total_training_steps,
        )
        batching = UpdateBatchingConfig(
            ppo_mini_batch_size=t.batch_size,
            ppo_micro_batch_size_per_gpu=t.micro_batch_size,
            use_dynamic_bsz=t.use_dynamic_bsz,
            ppo_max_token_len_per_gpu=t.max_token_len,
            ppo_epochs=1,
            shuffle=False,
            loss_agg_mode="token-mean",
            tree_packing=model.tree_packing,
        )
        best = BestSoFar(higher_is_better=False)
        progress = progress_bar(cfg.optim.total_training_steps, desc="sft steps")
        start = time.perf_counter()
        tokens_seen = 0

        def measure(step: int) -> float:
            loss = self.dev_loss(model, dev)
            tracker.log({"sft/dev_loss": loss}, step=step)
            return loss

        def keep(step: int) -> None:
            weights = fsdp_utils.full_model_state_dict(model.module, cpu_offload=True)  # LoRA adapters merged
            if self.rank == 0:
                fsdp_utils.export_hf(weights, cfg.model.path, out_dir / "huggingface")

        def train_step(step: int, epoch: int, indices: np.ndarray) -> None:
            nonlocal tokens_seen
            rows = indices[self.rank :: self.world_size]
            batch = pack_samples([train_ids[i] for i in rows], [train_masks[i] for i in rows], pad_id)
            metrics = model.run_update(
                batch, self._loss, batching, seed=t.seed + step, metric_prefix="sft", mask_key=MASK_KEY
            )
            tokens_seen += int(batch.batch["attention_mask"].sum()) * self.world_size
            metrics.update(
                {"sft/epoch": float(epoch), "perf/tokens_per_s": tokens_seen / (time.perf_counter() - start)}
            )
            tracker.log(metrics, step=step)

        on_step = progress.update if progress else lambda: None
        step, stop = run_epochs(len(train_ids), t, train_step, measure, best, keep, on_step)
        tracker.close()
        summary = {
            "best_dev_loss": best.value,
            "best_step": best.step,
            "steps": step,
            "stopped_early": stop,
            "train_samples": len(train_ids),
            "dropped_too_long": dropped,
            "dev_samples": len(dev),
            "hf_folder": str(out_dir / "huggingface"),
            "seconds": time.perf_counter() - start,
            "config": asdict(replace(cfg, train=t)),  # the batch that ran (`fit_batch` may have shrunk it)
        }
        if self.rank == 0:
            (out_dir / "sft_summary.json").write_text(json.dumps(summary, indent=2, default=str))
            if tracker.jsonl_path.is_file():
                plot_metrics(tracker.jsonl_path, out_dir / "metrics.png", SFT_PANELS)
        return summary
