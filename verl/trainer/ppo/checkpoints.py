"""A PPO run's checkpoints folder: saving a step atomically, finding and loading the one to resume from, pruning,
and the best validation (``trainer.keep_best``).

    checkpoints/
      global_step_<k>/           one complete step: actor/, critic/ (the workers' own), trainer_state.pt,
                                 rollout_ahead.pt (one-step-off: the next step's batch, rolled out ahead)
      latest_checkpointed_iteration.txt   k of the newest complete one (`LATEST_MARKER`)
      best_dev.json              {"step", "dev_success", "model"} (`BEST_FILE`)

A step is written under ``.tmp_global_step_<k>``, renamed into place, and only then named by the marker, so the
marker never names a half-written folder. Retention keeps the newest ``trainer.max_ckpt_to_keep`` and the best.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from verl.trainer.checkpoint import BEST_FILE, LATEST_MARKER
from verl.utils.jsonl import write_text_atomically

AHEAD_FILE = "rollout_ahead.pt"
TRAINER_STATE_FILE = "trainer_state.pt"


def dev_success(metrics: dict[str, float]) -> float | None:
    """A validation's success: the mean of its ``val/<source>/success_rate`` (None when it has none)."""
    rates = [v for k, v in metrics.items() if k.startswith("val/") and k.endswith("/success_rate")]
    return float(np.mean(rates)) if rates else None


class CheckpointStore:
    """The checkpoints folder ``root`` of one run (layout in the module docstring)."""

    def __init__(self, root: str | Path, max_to_keep: int, keep_best: bool, start_model: str) -> None:
        self.root = Path(root)
        self.max_to_keep = max_to_keep
        self.keep_best = keep_best
        self.start_model = start_model  # what "the best" is before any step beat it

    def step_dir(self, step: int) -> Path:
        return self.root / f"global_step_{step}"

    def save(self, step: int, write_parts: Callable[[Path], None], trainer_state: dict[str, Any]) -> Path:
        """Write step ``step``: ``write_parts(folder)`` (the workers' state, the rollout ahead), then
        ``trainer_state``; rename into place, update the marker, prune. Returns the folder."""
        final, tmp = self.step_dir(step), self.root / f".tmp_global_step_{step}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write_parts(tmp)
        torch.save(trainer_state, tmp / TRAINER_STATE_FILE)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        write_text_atomically(self.root / LATEST_MARKER, str(step))
        self._prune()
        return final

    def _prune(self) -> None:
        """Delete all but the newest ``max_to_keep`` steps, sparing the best."""
        kept = sorted(self.root.glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
        best = self.best_step()
        for old in kept[: max(len(kept) - self.max_to_keep, 0)]:
            if old.name != f"global_step_{best}":
                shutil.rmtree(old, ignore_errors=True)

    def latest_step(self) -> int | None:
        marker = self.root / LATEST_MARKER
        return int(marker.read_text().strip()) if marker.is_file() else None

    def resume_path(self, resume_mode: str, resume_from_path: str | None) -> Path | None:
        """The checkpoint to resume from: none (``disable``, or no marker yet), the given one (``resume_path``),
        or the one the marker names (``auto``); `FileNotFoundError` when that is not a checkpoint."""
        if resume_mode == "disable":
            return None
        if resume_mode == "resume_path":
            path = Path(resume_from_path)
            if not (path / TRAINER_STATE_FILE).is_file():
                raise FileNotFoundError(
                    f"trainer.resume_from_path={path} is not a checkpoint (no {TRAINER_STATE_FILE})"
                )
            return path
        step = self.latest_step()
        if step is None:
            return None
        path = self.step_dir(step)
        if not path.is_dir():
            raise FileNotFoundError(f"{self.root / LATEST_MARKER} names {path}, which does not exist")
        return path

    @staticmethod
    def load_trainer_state(path: Path) -> dict[str, Any]:
        return torch.load(path / TRAINER_STATE_FILE, weights_only=False)

    @staticmethod
    def load_ahead(path: Path) -> dict[str, Any] | None:
        return torch.load(path / AHEAD_FILE, weights_only=False) if (path / AHEAD_FILE).is_file() else None

    # ------------------------------------------------------------------ the best validation
    def best_step(self) -> int | None:
        path = self.root / BEST_FILE
        return json.loads(path.read_text())["step"] if path.is_file() else None

    def forget_best(self) -> None:
        """A new run: an earlier run's best is not this one's."""
        (self.root / BEST_FILE).unlink(missing_ok=True)

    def is_new_best(self, metrics: dict[str, float]) -> bool:
        """Whether this validation's `dev_success` beats every earlier one of the run; with ``keep_best`` only."""
        success = dev_success(metrics)
        if not self.keep_best or success is None:
            return False
        best = self.root / BEST_FILE
        return not best.is_file() or success > json.loads(best.read_text())["dev_success"]

    def mark_best(self, step: int, metrics: dict[str, float]) -> None:
        """Write `BEST_FILE` naming step ``step``'s checkpoint (the starting model at step 0), atomically; sets
        ``val/best_step`` in ``metrics``."""
        model = self.step_dir(step) if step else Path(self.start_model)
        self.root.mkdir(parents=True, exist_ok=True)
        best = {"step": step, "dev_success": dev_success(metrics), "model": str(model.resolve())}
        write_text_atomically(self.root / BEST_FILE, json.dumps(best) + "\n")
        metrics["val/best_step"] = float(step)
