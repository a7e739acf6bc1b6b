"""The train / dev / test splits every env cuts its tasks into, and the task ids of a split.

Each env's ``data`` module says which task ids each split holds and defines
``task_ids = task_ids_by_split(...)``: ``task_ids(split)`` answers the ids of
``split`` in ascending order, as a new list.  A split other than ``train``,
``dev`` or ``test`` is a ValueError: ``unknown split 'val'; expected 'train',
'dev' or 'test'``.
"""

from __future__ import annotations

from typing import Callable, Iterable, Literal, Mapping

Split = Literal["train", "dev", "test"]
SPLIT_NAMES: tuple[Split, ...] = ("train", "dev", "test")

SplitIds = Mapping[str, Iterable[int]]


def check_split(split: str) -> None:
    """ValueError unless ``split`` is ``train``, ``dev`` or ``test``."""
    if split not in SPLIT_NAMES:
        raise ValueError(f"unknown split {split!r}; expected 'train', 'dev' or 'test'")


def task_ids_by_split(splits: SplitIds | Callable[[], SplitIds]) -> Callable[[Split], list[int]]:
    """A data module's ``task_ids(split)`` over ``splits`` (split -> its task ids), or over what the function
    ``splits`` returns, called on every use (for splits that need the env's data loaded first)."""

    def task_ids(split: Split) -> list[int]:
        """The task ids of ``split`` (``train``, ``dev`` or ``test``), ascending; the splits are disjoint."""
        check_split(split)
        return sorted((splits() if callable(splits) else splits)[split])

    return task_ids
