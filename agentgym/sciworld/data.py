"""SciWorld's tasks: ``data_idx`` -> (task, variation), and the train / dev / test splits.

Public API (nothing here starts Java)::

    from agentgym.sciworld.data import task, task_ids, task_list, NUM_TASKS
    task(0)                # Task(task_id='1-1', name='boil', title='Changes of State (Boiling)', variation=0)
    task_ids("test")       # the data_idx of every test variation, ascending

``data_idx`` counts every (task, variation) pair of ScienceWorld, task by task
in the simulator's task order (``1-1``, ``1-2``, ... ``10-2``) and variations
from 0, leaving out tasks 5-1, 5-2, 9-1, 9-2, 9-3, 10-1 and 10-2 (`EXCLUDED`,
as AgentGym does): 23 tasks, ``NUM_TASKS`` = 4,639 pairs.

The splits are ScienceWorld's own: each task's variations are cut into train,
dev and test ranges, in that order (`VARIATIONS` holds each task's
``(variations, train, dev)``; the rest are test).  A ``data_idx`` is in the
split of its variation, so the splits are disjoint and every task appears in
each of them.  `VARIATIONS` was read from the simulator of ``scienceworld``
1.2.3 (``get_max_variations``, ``get_variations_train`` / ``_dev`` /
``_test``); a test checks it against the jar.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..splits import SPLIT_NAMES, Split, task_ids_by_split

EXCLUDED = ("5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2")
# task id -> (task name in the simulator, title, variations, train variations, dev variations)
VARIATIONS: dict[str, tuple[str, str, int, int, int]] = {
    "1-1": ("boil", "Changes of State (Boiling)", 30, 14, 7),
    "1-2": ("melt", "Changes of State (Melting)", 30, 14, 7),
    "1-3": ("freeze", "Changes of State (Freezing)", 30, 14, 7),
    "1-4": ("change-the-state-of-matter-of", "Changes of State (Any)", 30, 14, 7),
    "2-1": ("use-thermometer", "Use Thermometer", 540, 270, 135),
    "2-2": ("measure-melting-point-known-substance", "Measuring Boiling Point (known)", 436, 218, 109),
    "2-3": ("measure-melting-point-unknown-substance", "Measuring Boiling Point (unknown)", 300, 150, 75),
    "3-1": ("power-component", "Create a circuit", 20, 10, 5),
    "3-2": ("power-component-renewable-vs-nonrenewable-energy", "Renewable vs Non-renewable Energy", 20, 10, 5),
    "3-3": ("test-conductivity", "Test Conductivity (known)", 900, 450, 225),
    "3-4": ("test-conductivity-of-unknown-substances", "Test Conductivity (unknown)", 600, 300, 150),
    "4-1": ("find-living-thing", "Find a living thing", 300, 150, 75),
    "4-2": ("find-non-living-thing", "Find a non-living thing", 300, 150, 75),
    "4-3": ("find-plant", "Find a plant", 300, 150, 75),
    "4-4": ("find-animal", "Find an animal", 300, 150, 75),
    "6-1": ("chemistry-mix", "Mixing (generic)", 32, 16, 8),
    "6-2": ("chemistry-mix-paint-secondary-color", "Mixing paints (secondary colours)", 36, 18, 9),
    "6-3": ("chemistry-mix-paint-tertiary-color", "Mixing paints (tertiary colours)", 36, 18, 9),
    "7-1": ("lifespan-longest-lived", "Identify longest-lived animal", 125, 62, 31),
    "7-2": ("lifespan-shortest-lived", "Identify shortest-lived animal", 125, 62, 31),
    "7-3": ("lifespan-longest-lived-then-shortest-lived", "Identify longest-then-shortest-lived animal", 125, 62, 31),
    "8-1": ("identify-life-stages-1", "Identify life stages (plant)", 14, 6, 3),
    "8-2": ("identify-life-stages-2", "Identify life stages (animal)", 10, 4, 2),
}


@dataclass(frozen=True)
class Task:
    task_id: str  # ScienceWorld's id, e.g. "1-1"
    name: str  # the simulator's task name, e.g. "boil"
    title: str
    variation: int

    @property
    def split(self) -> Split:
        _, _, _, train, dev = VARIATIONS[self.task_id]
        return "train" if self.variation < train else "dev" if self.variation < train + dev else "test"


@functools.lru_cache(maxsize=1)
def _tasks() -> tuple[Task, ...]:
    return tuple(
        Task(task_id, name, title, variation)
        for task_id, (name, title, count, _, _) in VARIATIONS.items()
        for variation in range(count)
    )


NUM_TASKS = sum(count for _, _, count, _, _ in VARIATIONS.values())


def task(data_idx: int) -> Task:
    """The (task, variation) of ``data_idx``; ValueError unless ``0 <= data_idx < NUM_TASKS``."""
    if not 0 <= data_idx < NUM_TASKS:
        raise ValueError(f"data_idx {data_idx} out of range: expected 0 <= data_idx < {NUM_TASKS}")
    return _tasks()[data_idx]


@functools.lru_cache(maxsize=1)
def _split_ids() -> dict[Split, list[int]]:
    ids: dict[Split, list[int]] = {split: [] for split in SPLIT_NAMES}
    for data_idx, t in enumerate(_tasks()):
        ids[t.split].append(data_idx)
    return ids


task_ids = task_ids_by_split(_split_ids)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(data_idx, "Changes of State (Boiling), variation 21")]`` of ``split``: the env's task list."""
    return [(i, f"{task(i).title}, variation {task(i).variation}") for i in task_ids(split)]
