"""FrozenLake's tasks: task id -> map, and the train / dev / test splits.

Public API (gymnasium is imported only by `task_map`)::

    from agentgym.frozenlake.data import task_map, task_ids, task_list
    task_map(0)            # ('SFFF', 'FHFH', ...): rows of S start, F frozen, H hole, G goal
    task_ids("test")       # [0, ..., 199]; "dev" 200-299; "train" 300-1299

Task ``i`` (``0 <= i < NUM_TASKS``) is the map that gymnasium's
``generate_random_map`` draws with ``seed=i``, of side ``map_size(i)`` (4, 5 or 6
by ``i % 3``) and frozen-tile probability ``FROZEN_P``: start at the top left,
goal at the bottom right, and (gymnasium checks it) a path between them.
"""

from __future__ import annotations

import functools

from ..splits import Split, task_ids_by_split

NUM_TASKS = 1300
SPLITS: dict[str, range] = {"test": range(0, 200), "dev": range(200, 300), "train": range(300, NUM_TASKS)}
SIZES = (4, 5, 6)
FROZEN_P = 0.8


def map_size(task_id: int) -> int:
    """The side of task ``task_id``'s square map."""
    return SIZES[task_id % len(SIZES)]


@functools.lru_cache(maxsize=2048)
def task_map(task_id: int) -> tuple[str, ...]:
    """The rows of task ``task_id``'s map; ValueError unless ``0 <= task_id < NUM_TASKS``."""
    if not 0 <= task_id < NUM_TASKS:
        raise ValueError(f"data_idx {task_id} out of range: expected 0 <= data_idx < {NUM_TASKS}")
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    return tuple(generate_random_map(size=map_size(task_id), p=FROZEN_P, seed=task_id))


task_ids = task_ids_by_split(SPLITS)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, "cross the 5x5 frozen lake")]`` of ``split``: the env's task list for datasets."""
    return [(i, f"cross the {map_size(i)}x{map_size(i)} frozen lake") for i in task_ids(split)]
