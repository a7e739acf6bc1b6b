"""ALFWorld's games: task id -> game, the train / dev / test splits, and folders of real ALFWorld game files.

Public API (``alfworld`` is imported only when a game is built)::

    from agentgym.alfworld.data import task_ids, task_list, generated_game, GameFolder
    task_ids("test")        # [0, ..., 299]; "dev" 300-599; "train" 600-3599
    generated_game(0)       # Game: task 0 generated offline (see `agentgym.alfworld.generate`)
    GameFolder(path)[i]     # Game: the i-th real ALFWorld game under ``path``

Task ``i`` (``0 <= i < NUM_TASKS``) is the game `generate.generate` builds for
``i``: task type ``TASK_TYPES[i % 6]`` (so every split holds the six types in
turn), room, objects and goal drawn from a generator seeded by ``i``.  The
splits are disjoint ranges of ids: test first, then dev, then train.

A `GameFolder` serves ALFWorld's own benchmark games instead: every
``game.tw-pddl`` under the folder that has a ``traj_data.json`` beside it and
is not marked unsolvable, in sorted path order; game ``i`` is the ``i``-th.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..splits import Split, task_ids_by_split
from .generate import TASK_TYPES

NUM_TASKS = 3600
SPLITS: dict[str, range] = {"test": range(0, 300), "dev": range(300, 600), "train": range(600, NUM_TASKS)}


@dataclass(frozen=True)
class Game:
    """One playable game: its data as ``game.tw-pddl`` holds it (a dict) or the path of that file."""

    game_id: int
    task_type: str
    source: dict[str, Any] | str


def task_type(task_id: int) -> str:
    """The task type of generated task ``task_id`` (one of ALFWorld's six)."""
    return TASK_TYPES[task_id % len(TASK_TYPES)]


def check_task_id(task_id: int, count: int = NUM_TASKS) -> None:
    """ValueError unless ``0 <= task_id < count``."""
    if not 0 <= task_id < count:
        raise ValueError(f"game {task_id} out of range: expected 0 <= game < {count}")


@functools.lru_cache(maxsize=256)
def generated_game(task_id: int) -> Game:
    """Generated task ``task_id`` as a `Game`; ValueError unless ``0 <= task_id < NUM_TASKS``."""
    check_task_id(task_id)
    from .generate import game_data, generate

    task = generate(task_id)
    return Game(task_id, task.task_type, game_data(task))


@functools.lru_cache(maxsize=NUM_TASKS)
def goal(task_id: int) -> str:
    """The task sentence of generated task ``task_id`` (``put a clean mug in coffeemachine``)."""
    check_task_id(task_id)
    from .generate import generate

    return generate(task_id).goal


task_ids = task_ids_by_split(SPLITS)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, task sentence)]`` of ``split``: the env's task list for datasets."""
    return [(i, goal(i)) for i in task_ids(split)]


class GameFolder:
    """ALFWorld's benchmark games found under ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()
        if not self.root.is_dir():
            raise ValueError(f"--data-dir {self.root} is not a folder")
        self.paths: Sequence[Path] = [p for p in sorted(self.root.rglob("game.tw-pddl")) if self._playable(p)]
        if not self.paths:
            raise ValueError(f"no ALFWorld game (game.tw-pddl beside traj_data.json) under {self.root}")

    @staticmethod
    def _playable(path: Path) -> bool:
        if not (path.parent / "traj_data.json").is_file():
            return False
        try:
            return json.loads(path.read_text()).get("solvable", True) is not False
        except (OSError, ValueError):
            return False

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, game_id: int) -> Game:
        check_task_id(game_id, len(self))
        path = self.paths[game_id]
        traj = json.loads((path.parent / "traj_data.json").read_text())
        return Game(game_id, str(traj.get("task_type", "")), str(path))
