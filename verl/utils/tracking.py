"""Metric sinks chosen by ``trainer.logger``: console, jsonl, tensorboard, wandb (offline works without network)."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

BACKENDS = ("console", "jsonl", "tensorboard", "wandb")

# the few numbers the one-line console summary shows, in order
CONSOLE_KEYS = (
    ("env/success_rate", "succ"),
    ("filter/kept_success_rate", "kept_succ"),
    ("env/reward/mean", "reward"),
    ("env/turns/mean", "turns"),
    ("actor/pg_loss", "pg"),
    ("critic/vf_loss", "vf"),
    ("actor/reward_kl_penalty", "kl"),
    ("actor/kl_loss", "kl_loss"),
    ("actor/entropy", "ent"),
    ("response_length/mean", "resp_len"),
    ("timing_s/step", "step_s"),
    ("sft/train_loss", "loss"),
    ("sft/dev_loss", "dev_loss"),
    ("reward_model/agreement", "rm_agree"),
    ("rm/train_loss", "loss"),
    ("rm/dev_auc", "dev_auc"),
    ("rm/dev_pair_accuracy", "dev_pair_acc"),
    ("rm/test_auc", "test_auc"),
)


def _clean(metrics: dict) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        try:
            value = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            out[key] = value
    return out


def time_left(seconds: float) -> str:
    """``seconds`` as the console line's estimate: ``~40 s left``, ``~3.5 min left``, ``~1.2 h left``."""
    if seconds < 90:
        return f"~{seconds:.0f} s left"
    return f"~{seconds / 60:.1f} min left" if seconds < 5400 else f"~{seconds / 3600:.1f} h left"


class Tracking:
    """Send a dict of scalar metrics per step to every configured backend.

    With ``total_steps`` the console line reads ``[step k/total] ... ~T left``, where T is the mean wall
    time per step since this tracker started, times the steps still to go.
    """

    def __init__(
        self,
        project: str,
        experiment: str,
        backends: list[str],
        log_dir: str,
        config: dict | None = None,
        total_steps: int | None = None,
    ):
        unknown = [b for b in backends if b not in BACKENDS]
        if unknown:
            raise ValueError(f"unknown logger(s) {unknown}; known: {list(BACKENDS)}")
        self.backends = list(backends)
        self.total_steps = total_steps
        self._started = time.monotonic()
        self._first_step: int | None = None
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = self.log_dir / "metrics.jsonl"
        self._jsonl = open(self.jsonl_path, "a") if "jsonl" in backends else None
        self._tb = None
        if "tensorboard" in backends:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.log_dir / "tensorboard"))
        self._wandb = None
        if "wandb" in backends:
            import wandb

            os.environ.setdefault("WANDB_MODE", "offline")
            self._wandb = wandb.init(project=project, name=experiment, config=config or {}, dir=str(self.log_dir))

    def log(self, metrics: dict, step: int) -> None:
        data = _clean(metrics)
        if "console" in self.backends:
            parts = [f"{short}={data[key]:.4g}" for key, short in CONSOLE_KEYS if key in data]
            val = [
                f"{k}={v:.4g}"
                for k, v in data.items()
                if k.startswith("val/") and k.endswith(("success_rate", "reward/mean"))
            ]
            tag, estimate = self._progress(step)
            print(f"[{tag}] " + " ".join(parts + val + estimate), file=sys.stdout, flush=True)
        if self._jsonl:
            self._jsonl.write(json.dumps({"step": step, **data}) + "\n")
            self._jsonl.flush()
        if self._tb:
            for key, value in data.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb:
            self._wandb.log(data, step=step)

    def _progress(self, step: int) -> tuple[str, list[str]]:
        """The console line's tag (``step k``, or ``step k/total``) and, with a total, the estimate of the time left."""
        if not self.total_steps:
            return f"step {step}", []
        if self._first_step is None:
            self._first_step = max(step - 1, 0)  # a resumed run counts its steps from where it began
        done, left = step - self._first_step, self.total_steps - step
        estimate = [f"({time_left((time.monotonic() - self._started) / done * left)})"] if done > 0 and left > 0 else []
        return f"step {step}/{self.total_steps}", estimate

    def close(self) -> None:
        if self._jsonl:
            self._jsonl.close()
        if self._tb:
            self._tb.close()
        if self._wandb:
            self._wandb.finish()


def progress_bar(total: int, done: int = 0, desc: str = "steps", unit: str = "step", leave: bool = True):
    """A tqdm bar over ``total`` units when stderr is a terminal; None otherwise (logs stay clean).
    ``leave=False`` clears the bar when it closes (a bar nested under the step bar)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc=desc, unit=unit, leave=leave)
