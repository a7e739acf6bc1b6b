"""Task rows from parquet, batched into `DataProto`s in a seeded, resumable order.

Each row names one task in verl's format: ``data_source`` (required),
``prompt``, ``ability``, ``reward_model`` (``ground_truth``) and
``extra_info`` (for env tasks ``index`` = the environment's task id, which the
agent checks; single-turn rows need none). Every column becomes a non-tensor
entry of the batch and is carried through the rollout to the reward path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from verl.protocol import DataProto

REQUIRED_COLUMNS = ("data_source",)


def read_tasks(path: str | Path, max_rows: int = -1) -> pd.DataFrame:
    """Read a task parquet and check its columns (``max_rows > 0`` keeps the first rows)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task file {path} does not exist (run scripts/prepare_data.py)")
    frame = pd.read_parquet(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}; has {list(frame.columns)}")
    return frame.iloc[:max_rows].reset_index(drop=True) if max_rows > 0 else frame


def _to_python(value):
    """pyarrow gives numpy arrays for list columns; hand the agent plain Python values."""
    if isinstance(value, np.ndarray):
        return [_to_python(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_python(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


class TaskDataLoader:
    """Batches of ``batch_size`` rows; epoch e uses permutation ``RandomState(seed + e)`` when shuffling.

    ``state_dict()`` / ``load_state_dict()`` capture the position (epoch, batch),
    so a resumed run continues with exactly the batches the original would have
    seen. The last incomplete batch of an epoch is dropped.
    """

    def __init__(self, frame: pd.DataFrame, batch_size: int, shuffle: bool = True, seed: int = 0):
        if batch_size < 1 or batch_size > len(frame):
            raise ValueError(f"batch_size {batch_size} must be in [1, {len(frame)}] (rows in the task file)")
        self.frame, self.batch_size, self.shuffle, self.seed = frame, batch_size, shuffle, seed
        self.epoch, self.batch_in_epoch = 0, 0

    def __len__(self) -> int:
        return len(self.frame) // self.batch_size

    def _order(self, epoch: int) -> np.ndarray:
        n = len(self.frame)
        return np.random.RandomState(self.seed + epoch).permutation(n) if self.shuffle else np.arange(n)

    def rows_to_proto(self, rows: np.ndarray) -> DataProto:
        part = self.frame.iloc[rows]
        return DataProto.from_dict(non_tensors={c: [_to_python(v) for v in part[c]] for c in part.columns})

    def next_batch(self) -> DataProto:
        if self.batch_in_epoch >= len(self):
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        start = self.batch_in_epoch * self.batch_size
        rows = self._order(self.epoch)[start : start + self.batch_size]
        self.batch_in_epoch += 1
        return self.rows_to_proto(rows)

    def all_batches(self) -> list[DataProto]:
        """Every row once, in file order, in batches (the last may be smaller): for validation."""
        n = len(self.frame)
        return [self.rows_to_proto(np.arange(s, min(s + self.batch_size, n))) for s in range(0, n, self.batch_size)]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.batch_in_epoch = state["epoch"], state["batch_in_epoch"]
