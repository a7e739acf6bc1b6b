"""Deterministic per-sample seeds, shared by every rollout (multi-turn agent and single-turn generation).

A sample's seed names its task, never its place in a batch, so the same evaluation gives the same samples
whatever the batch size, the number of env servers or the rollout mode.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Iterable

SEED_MOD = 2**31


def trajectory_seed(base_seed: int, global_step: int, task: str, copy: int) -> int:
    """A deterministic seed in ``[0, 2**31)``: blake2b of ``"base:step:task:copy"``, where ``task`` names the
    task (e.g. ``"webshop:12"``, see `task_keys`) and ``copy`` is the sample's index among the task's ``n``."""
    digest = hashlib.blake2b(f"{base_seed}:{global_step}:{task}:{copy}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % SEED_MOD


def task_keys(names: Iterable[str]) -> list[str]:
    """Each task's name, with ``#k`` appended to its k-th repeat within the batch (k >= 1), so a task listed
    twice in one batch samples differently the second time; a batch without repeats keeps the names as they are."""
    seen: Counter[str] = Counter()
    keys = []
    for name in names:
        keys.append(f"{name}#{seen[name]}" if seen[name] else name)
        seen[name] += 1
    return keys
