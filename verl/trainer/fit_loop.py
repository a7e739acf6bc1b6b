"""The loop the SFT and reward-model trainers share: epochs of shuffled batches, dev evaluations, the best weights
kept, early stopping.

    with eval_before_train: evaluate at step 0 (the untrained model: a usable output even if nothing improves)
    for epoch in range(epochs):
        order = permutation(n_items, seed + epoch)
        for each of n_items // batch_size batches of that order:
            step += 1; train_step(step, epoch, the batch's item indices)
            every eval_freq steps: evaluate; stop after `patience` evaluations without a better figure
        after the epoch (unless its last step was just evaluated): evaluate

An evaluation is ``measure(step)``, the dev figure, offered to `BestSoFar` (``higher_is_better`` says which way
is better); when it is the best so far, ``keep(step)`` saves the weights. `FitTrainer` is what both trainers are
before their model: a config, torch's threads, the process group, the seed and the training precision; and how a
loaded model becomes the trainable one (``trainable``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from verl.single_controller.base import Worker
from verl.utils import fsdp_utils
from verl.utils.precision import announce, resolve_dtype
from verl.utils.typed_config import ConfigError, require_counts
from verl.workers.trainable import TrainableModule


@dataclass
class LoopConfig:
    """The ``train`` settings both offline trainers have (each adds its own; the defaults are in each one's YAML)."""

    batch_size: int  # items per optimiser step (samples, trajectories or pairs; over all ranks)
    max_token_len: int  # tokens per micro-batch
    tree_packing: str  # on | off | auto: rows that share a prefix run it once (verl/utils/prefix_tree.py)
    epochs: int
    mixed_precision: str  # auto: bf16 where the hardware runs it fast (AMX, a probe, a bf16 GPU), else fp32
    grad_clip: float
    eval_before_train: bool  # also evaluate the untrained model (step 0), which then competes for the best weights
    eval_freq: int  # also evaluate every N steps (0: only after each epoch)
    patience: int  # evaluations without a better dev figure before stopping
    seed: int


def check_loop(where: str, train: LoopConfig, model_path: str, at_least_one: tuple[str, ...]) -> None:
    """`ConfigError` unless each ``train`` setting named in ``at_least_one`` is >= 1 and ``model_path`` is a Hugging
    Face model folder."""
    require_counts(train, at_least_one, f"{where}.train")
    if not model_path or not (Path(model_path) / "config.json").is_file():
        raise ConfigError(f"{where}.model.path={model_path!r} is not a Hugging Face model folder (no config.json)")


@dataclass
class BestSoFar:
    """The best dev figure seen and its step; ``misses`` counts the evaluations since it last improved."""

    higher_is_better: bool
    value: float = math.nan
    step: int = 0
    misses: int = 0

    def offer(self, value: float, step: int) -> bool:
        """Record ``value`` measured at ``step``; whether it is the best so far (the first one always is)."""
        better = value > self.value if self.higher_is_better else value < self.value
        if math.isnan(self.value) or better:
            self.value, self.step, self.misses = value, step, 0
            return True
        self.misses += 1
        return False


def steps_per_epoch(n_items: int, batch_size: int) -> int:
    return max(n_items // batch_size, 1)


def run_epochs(
    n_items: int,
    settings: LoopConfig,
    train_step: Callable[[int, int, np.ndarray], None],
    measure: Callable[[int], float],
    best: BestSoFar,
    keep: Callable[[int], None],
    on_step: Callable[[], None] = lambda: None,
) -> tuple[int, bool]:
    """Run the loop above: ``train_step(step, epoch, indices)``, ``measure(step)`` and ``keep(step)`` as said there,
    and ``on_step()`` after every step (a progress bar); returns ``(steps run, stopped early)``."""

    def evaluate(step: int) -> bool:
        """Whether to stop: `patience` evaluations in a row without a better figure."""
        if best.offer(measure(step), step):
            keep(step)
            return False
        return best.misses >= settings.patience

    step, stop = 0, settings.eval_before_train and evaluate(0)
    for epoch in range(settings.epochs):
        if stop:
            break
        order = np.random.RandomState(settings.seed + epoch).permutation(n_items)
        for s in range(steps_per_epoch(n_items, settings.batch_size)):
            step += 1
            train_step(step, epoch, order[s * settings.batch_size : (s + 1) * settings.batch_size])
            on_step()
            if settings.eval_freq and step % settings.eval_freq == 0 and (stop := evaluate(step)):
                break
        if not stop and (not settings.eval_freq or step % settings.eval_freq):
            stop = evaluate(step)
    return step, stop


class FitTrainer(Worker):
    """A trainer whose ``config`` has ``trainer`` (``device``, ``num_threads``), ``train`` (``seed``,
    ``mixed_precision``, ``grad_clip``, ``tree_packing``), ``model`` (``enable_gradient_checkpointing``) and
    ``optim`` sections."""

    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        torch.set_num_threads(config.trainer.num_threads)

    def start(self, who: str) -> None:
        """Join the process group, seed torch, and pick the training precision (``self.dtype``), announced as
        ``who``'s."""
        cfg = self.config
        self.init_distributed(cfg.trainer.device)
        torch.manual_seed(cfg.train.seed)
        precision = resolve_dtype(cfg.train.mixed_precision, cfg.trainer.device, "train")
        announce(who, precision)
        self.dtype = precision.dtype

    def trainable(self, module: torch.nn.Module) -> TrainableModule:
        """``module`` (loaded in fp32) sharded on the device with its optimiser and schedule
        (`fsdp_utils.prepare_for_training`), as a `TrainableModule` under the config's precision, gradient clip and
        tree packing; the process has the box to itself, so it keeps its freed heap between steps."""
        cfg = self.config
        module, optimizer, scheduler = fsdp_utils.prepare_for_training(
            module, cfg.trainer.device, cfg.optim, cfg.model.enable_gradient_checkpointing
        )
        return TrainableModule(
            module,
            optimizer,
            scheduler,
            cfg.trainer.device,
            self.dtype,
            cfg.train.grad_clip,
            cfg.train.tree_packing,
            release_heap=False,
        )
