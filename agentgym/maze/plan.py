"""Shortest paths in a maze, by breadth-first search.

`shortest_path(passable, start, goal)` works on any maze given as a predicate
``passable(cell) -> bool`` over (row, column) cells and answers the moves
(``up``, ``down``, ``left``, ``right``, tried in the order of `MOVES`) of a
shortest path from ``start`` to ``goal``, or None.  ``limit`` bounds the
cells searched (for open-ended predicates).  `oracle(task_id)` is that path on
`agentgym.maze.data.MAZE` from the task's start: the reference solution the
tests play, as the env's actions (``move down``...).  `SIDES` names the side
each move leads to, as the observations word it.
"""

from __future__ import annotations

from typing import Callable, Iterator

from ..paths import shortest_moves
from .data import GOAL, Cell, is_open, start_of

MOVES: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
SIDES: dict[str, str] = {"up": "above you", "down": "below you", "left": "to your left", "right": "to your right"}


def shortest_path(passable: Callable[[Cell], bool], start: Cell, goal: Cell, limit: int = 100_000) -> list[str] | None:
    """The moves of a shortest path from ``start`` to ``goal`` over passable cells, or None (none within ``limit``)."""

    def steps(cell: Cell) -> Iterator[tuple[str, Cell]]:
        for move, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if passable(nxt):
                yield move, nxt

    return shortest_moves(start, lambda cell: cell == goal, steps, limit)


def oracle(task_id: int) -> list[str]:
    """The actions that solve task ``task_id``: ``move <direction>`` along a shortest path to the goal."""
    path = shortest_path(is_open, start_of(task_id), GOAL)
    assert path is not None, f"task {task_id} has no path"  # every open cell of MAZE joins the goal
    return [f"move {move}" for move in path]
