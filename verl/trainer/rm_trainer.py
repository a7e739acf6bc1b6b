"""Reward-model training: a scalar head on a causal LM, taught by trajectories the env labelled.

Data (``scripts/make_rm_data.py``): one row per trajectory, its ``input_ids``, ``turn_ends``,
``success``, ``env_reward`` and ``task_id``. The score ``s`` of a trajectory is the model's
``r(x_{<=t})`` at its last model token ``t`` (`verl.workers.reward_model`): the final action,
before the env's verdict on it. Objectives (``train.objective``):

    pointwise:  L = -[y log sigmoid(s) + (1 - y) log(1 - sigmoid(s))]     y = success, mean over trajectories
    pairwise:   L = -log sigmoid(s_chosen - s_rejected)                    mean over same-task pairs
                                                                           whose env rewards differ (Bradley-Terry)

Each optimiser step takes ``train.batch_size`` units (trajectories, or pairs with both rows in one
micro-batch), split into micro-batches of at most ``train.max_token_len`` tokens; a micro-batch of
rows that share a prefix runs it once (tree packing, exact). The dev AUC (success against score) is
measured after every epoch (and every ``eval_freq`` steps); the best weights are saved as a Hugging
Face ``*ForSequenceClassification`` folder (``<output_dir>/huggingface``, what
``reward_model.model.path`` takes) and training stops after ``patience`` evaluations without a better
one. With ``data.test_files`` the best weights are scored on it once at the end.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from verl.trainer.fit_loop import BestSoFar, FitTrainer, LoopConfig, check_loop, run_epochs, steps_per_epoch
from verl.trainer.sft_trainer import RunConfig
from verl.utils import fsdp_utils
from verl.utils.prefix_tree import tree_size
from verl.utils.ranking import roc_auc
from verl.utils.torch_functional import autocast
from verl.utils.typed_config import ConfigError, defaults_from
from verl.workers.config import OptimConfig, check_tree_packing
from verl.workers.reward_model import load_score_model, position_scores
from verl.workers.trainable import TREE_AUTO_MIN_GAIN, TrainableModule

OBJECTIVES = ("pointwise", "pairwise")


@dataclass
@defaults_from("rm_trainer", "data")
class RMDataConfig:
    train_files: str
    val_files: str
    test_files: str  # "": none
    max_length: int


@dataclass
@defaults_from("rm_trainer", "model")
class RMModelConfig:
    path: str
    enable_gradient_checkpointing: bool
    attn_implementation: str


@dataclass
@defaults_from("rm_trainer", "train")
class RMTrainConfig(LoopConfig):
    objective: str


@dataclass
@defaults_from("rm_trainer")
class RMConfig:
    """The whole of ``rm_trainer.yaml``, typed; its defaults are the YAML's values."""

    data: RMDataConfig
    model: RMModelConfig
    optim: OptimConfig
    train: RMTrainConfig
    trainer: RunConfig

    def validate(self, where: str) -> None:
        t = self.train
        if t.objective not in OBJECTIVES:
            raise ConfigError(f"{where}.train.objective must be one of {list(OBJECTIVES)}, got {t.objective!r}")
        check_loop(where, t, self.model.path, ("batch_size", "max_token_len", "epochs", "patience"))
        check_tree_packing(t.tree_packing, self.model.attn_implementation, f"{where}.train")

    def check_files(self, where: str) -> None:
        files = [("train_files", self.data.train_files), ("val_files", self.data.val_files)]
        files += [("test_files", self.data.test_files)] if self.data.test_files else []
        for key, path in files:
            if not Path(path).is_file():
                raise ConfigError(f"{where}.data.{key}={path!r} does not exist (run scripts/make_rm_data.py)")


def same_task_pairs(task_ids: Sequence[int], rewards: Sequence[float]) -> list[tuple[int, int]]:
    """Every pair of rows of one task whose rewards differ, as ``(chosen, rejected)`` (chosen: the higher reward),
    tasks in order of first appearance, rows in order within a task."""
    by_task: dict[int, list[int]] = {}
    for row, task in enumerate(task_ids):
        by_task.setdefault(int(task), []).append(row)
    pairs = []
    for rows in by_task.values():
        for a, b in itertools.combinations(rows, 2):
            if rewards[a] != rewards[b]:
                pairs.append((a, b) if rewards[a] > rewards[b] else (b, a))
    return pairs


@dataclass
class Trajectories:
    """Labelled trajectories: token ids, where each is scored (its last model token), the env's verdict."""

    ids: list[list[int]]
    score_at: list[int]
    success: np.ndarray
    reward: np.ndarray
    task: np.ndarray

    def pairs(self) -> list[tuple[int, int]]:
        return same_task_pairs(self.task.tolist(), self.reward.tolist())


def read_trajectories(path: str, max_length: int) -> tuple[Trajectories, int]:
    """The trajectories of a ``make_rm_data.py`` parquet, and how many were dropped (longer than ``max_length``,
    or without a model token)."""
    frame = pd.read_parquet(path)
    missing = [c for c in ("input_ids", "turn_ends", "success", "env_reward", "task_id") if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}; has {list(frame.columns)}")
    keep = [i for i in range(len(frame)) if len(frame["turn_ends"][i]) and len(frame["input_ids"][i]) <= max_length]
    if not keep:
        raise ValueError(f"{path}: no trajectory of at most {max_length} tokens with a model turn")
    return Trajectories(
        ids=[[int(v) for v in frame["input_ids"][i]] for i in keep],
        score_at=[int(frame["turn_ends"][i][-1]) for i in keep],
        success=frame["success"].to_numpy(dtype=bool)[keep],
        reward=frame["env_reward"].to_numpy(dtype=np.float64)[keep],
        task=frame["task_id"].to_numpy(dtype=np.int64)[keep],
    ), len(frame) - len(keep)


def layout_cost(rows: list[list[int]], tree_packing: str) -> tuple[int, bool]:
    """Tokens a micro-batch of ``rows`` runs, and whether it is tree-packed: ``on`` packs, ``off`` pads to the
    longest row, ``auto`` packs when padding would run at least `TREE_AUTO_MIN_GAIN` times the tree's tokens."""
    flat = len(rows) * max(len(r) for r in rows)
    if tree_packing == "off":
        return flat, False
    tree = tree_size([np.asarray(r) for r in rows])
    packed = tree_packing == "on" or flat >= TREE_AUTO_MIN_GAIN * tree
    return (tree if packed else flat), packed


def plan_units(
    units: list[list[int]], ids: list[list[int]], max_tokens: int, tree_packing: str
) -> list[tuple[list[int], bool]]:
    """Consecutive units (a trajectory, or a pair's two rows) grouped into micro-batches running at most
    ``max_tokens`` tokens (a unit over the budget runs alone); each with whether it is tree-packed."""
    plan: list[tuple[list[int], bool]] = []
    current: list[int] = []
    packed = False  # the layout of `current`
    for unit in units:
        tokens, grown = layout_cost([ids[r] for r in current + unit], tree_packing)
        if current and tokens > max_tokens:
            plan.append((current, packed))
            current, grown = [], layout_cost([ids[r] for r in unit], tree_packing)[1]
        current, packed = current + unit, grown
    if current:
        plan.append((current, packed))
    return plan


def score_rows(
    module: torch.nn.Module,
    ids: list[list[int]],
    score_at: list[int],
    device: str,
    dtype: str,
    packed: bool,
    pad_id: int,
) -> torch.Tensor:
    """``(len(ids),)`` fp32: each row's score at its ``score_at`` position (rows right-padded with ``pad_id``)."""
    width = max(len(r) for r in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):
        input_ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    with autocast(device, dtype):
        scores = position_scores(module, input_ids.to(device), mask.to(device), packed)
    return scores[torch.arange(len(ids), device=scores.device), torch.tensor(score_at, device=scores.device)]


def unit_loss(scores: torch.Tensor, units: list[list[int]], success: np.ndarray) -> torch.Tensor:
    """Summed loss of ``units`` (row positions into ``scores``): BCE for a trajectory, Bradley-Terry for a pair."""
    total = scores.new_zeros(())
    for unit in units:
        if len(unit) == 1:
            y = torch.tensor(float(success[unit[0]]), device=scores.device)
            total = total + F.binary_cross_entropy_with_logits(scores[unit[0]], y)
        else:
            total = total - F.logsigmoid(scores[unit[0]] - scores[unit[1]])
    return total


def export_reward_model(weights: dict[str, torch.Tensor], config, tokenizer_path: str, folder: Path) -> None:
    """``weights`` as a Hugging Face one-label ``*ForSequenceClassification`` folder (config with its
    architecture, safetensors, the tokenizer of ``tokenizer_path``)."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"}
    )
    config.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(tokenizer_path).save_pretrained(str(folder))


class RMTrainer(FitTrainer):
    """Reward-model training on one rank (FSDP-sharded like every trained module here)."""

    config: RMConfig

    def _build(self) -> TrainableModule:
        """The sharded model with its optimiser and schedule; its attention set for tree packing (`TrainableModule`)."""
        cfg = self.config
        self.start("reward model training")
        if self.world_size != 1:
            raise ConfigError(f"reward-model training runs on one rank; got a world of {self.world_size}")
        module = load_score_model(cfg.model.path, cfg.model.attn_implementation)
        module.config.architectures = [type(module).__name__]
        self.hf_config = module.config
        model = self.trainable(module)
        self.tree_packing = model.tree_packing
        return model

    @torch.no_grad()
    def scores(self, module: torch.nn.Module, data: Trajectories) -> np.ndarray:
        """Every trajectory's score under ``module``, in order."""
        module.eval()
        out = np.zeros(len(data.ids))
        units = [[i] for i in range(len(data.ids))]
        for rows, packed in plan_units(units, data.ids, self.config.train.max_token_len, self.tree_packing):
            s = score_rows(
                module,
                [data.ids[r] for r in rows],
                [data.score_at[r] for r in rows],
                self.config.trainer.device,
                self.dtype,
                packed,
                self.pad_id,
            )
            out[rows] = s.cpu().numpy()
        return out

    def report(self, scores: np.ndarray, data: Trajectories) -> dict[str, float]:
        """AUC (success against score), pair accuracy (same-task pairs ranked as the env ranks them), mean losses."""
        s = torch.tensor(scores)
        pairs = data.pairs()
        out = {
            "auc": roc_auc(scores, data.success),
            "pointwise_loss": float(
                F.binary_cross_entropy_with_logits(s, torch.tensor(data.success, dtype=torch.float64))
            ),
        }
        if pairs:
            chosen, rejected = s[[c for c, _ in pairs]], s[[r for _, r in pairs]]
            out["pair_accuracy"] = float(((chosen > rejected).double() + 0.5 * (chosen == rejected).double()).mean())
            out["pairwise_loss"] = float(-F.logsigmoid(chosen - rejected).mean())
        out["success_rate"] = float(data.success.mean())
        return out

    def fit(self) -> dict:
        """Train, keep the best dev-AUC weights as an HF folder, and return a summary (also ``rm_summary.json``)."""
        from transformers import AutoTokenizer

        from verl.utils.tracking import Tracking, progress_bar

        cfg, t = self.config, self.config.train
        tokenizer = AutoTokenizer.from_pretrained(cfg.model.path)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        train, dropped = read_trajectories(cfg.data.train_files, cfg.data.max_length)
        dev, _ = read_trajectories(cfg.data.val_files, cfg.data.max_length)
        units = [[i] for i in range(len(train.ids))] if t.objective == "pointwise" else [list(p) for p in train.pairs()]
        if not units:
            raise ValueError(
                f"{cfg.data.train_files}: no same-task pair with different rewards for train.objective=pairwise"
            )
        cfg.optim.total_training_steps = steps_per_epoch(len(units), t.batch_size) * t.epochs
        model = self._build()
        module, optimizer = model.module, model.optimizer
        out_dir = Path(cfg.trainer.output_dir)
        tracker = Tracking(
            cfg.trainer.project_name,
            cfg.trainer.experiment_name,
            cfg.trainer.logger,
            str(out_dir),
            total_steps=cfg.optim.total_training_steps,
        )
        print(
            f"[rm] {len(train.ids)} train trajectories ({dropped} dropped), {len(units)} {t.objective} units, "
            f"{len(dev.ids)} dev; {cfg.optim.total_training_steps} steps",
            flush=True,
        )
        best, best_weights = BestSoFar(higher_is_better=True), None
        progress = progress_bar(cfg.optim.total_training_steps, desc="rm steps")
        start = time.perf_counter()

        def measure(step: int) -> float:
            """The dev figures, logged; the AUC (the negated pointwise loss where the AUC is undefined)."""
            figures = self.report(self.scores(module, dev), dev)
            tracker.log({f"rm/dev_{k}": v for k, v in figures.items() if v is not None}, step=step)
            return figures["auc"] if figures["auc"] is not None else -figures["pointwise_loss"]

        def keep(step: int) -> None:
            nonlocal best_weights
            best_weights = fsdp_utils.full_model_state_dict(module, cpu_offload=True)
            export_reward_model(best_weights, self.hf_config, cfg.model.path, out_dir / "huggingface")

        def train_step(step: int, epoch: int, indices: np.ndarray) -> None:
            step_units = [units[i] for i in indices]
            module.train()
            optimizer.zero_grad(set_to_none=True)
            loss_sum = 0.0
            for rows, packed in plan_units(step_units, train.ids, t.max_token_len, self.tree_packing):
                scores = score_rows(
                    module,
                    [train.ids[r] for r in rows],
                    [train.score_at[r] for r in rows],
                    cfg.trainer.device,
                    self.dtype,
                    packed,
                    self.pad_id,
                )
                local = {row: k for k, row in enumerate(rows)}
                mb_units = [[local[r] for r in u] for u in step_units if u[0] in local]
                loss = unit_loss(scores, mb_units, train.success[rows]) / len(step_units)
                loss.backward()
                loss_sum += loss.item()
            norm = model.clip_and_step()
            optimizer.zero_grad(set_to_none=True)
            model.scheduler.step()
            lr = optimizer.param_groups[0]["lr"]
            metrics = {"rm/train_loss": loss_sum, "rm/grad_norm": norm, "rm/lr": lr, "rm/epoch": float(epoch)}
            tracker.log(metrics, step=step)

        on_step = progress.update if progress else lambda: None
        step, stop = run_epochs(len(units), t, train_step, measure, best, keep, on_step)
        summary = {
            "best_dev_auc": best.value,
            "best_step": best.step,
            "steps": step,
            "stopped_early": stop,
            "objective": t.objective,
            "train_trajectories": len(train.ids),
            "train_units": len(units),
            "dropped_too_long": dropped,
            "dev_trajectories": len(dev.ids),
            "hf_folder": str(out_dir / "huggingface"),
            "seconds": time.perf_counter() - start,
        }
        if cfg.data.test_files:
            fsdp_utils.load_full_train_state(module, None, best_weights, None)
            test, _ = read_trajectories(cfg.data.test_files, cfg.data.max_length)
            summary["test"] = self.report(self.scores(module, test), test)
            summary["test_trajectories"] = len(test.ids)
            tracker.log({f"rm/test_{k}": v for k, v in summary["test"].items() if v is not None}, step=step)
        tracker.close()
        summary["config"] = asdict(cfg)
        (out_dir / "rm_summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary
