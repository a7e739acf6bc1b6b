"""Shortest safe paths on a FrozenLake map, by breadth-first search.

`shortest_path(rows, start)` works on any map given as rows of cells (``H``
is a hole, ``G`` the goal, anything else walkable) and answers the moves
(``up``, ``down``, ``left``, ``right``, tried in the order of `MOVES`) of a
shortest path from ``start`` (row, column from 0) to a ``G``, or None.
`oracle(task_id)` is that path on the task's map from its start: the
reference solution the tests play.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from ..paths import shortest_moves
from .data import task_map

Cell = tuple[int, int]
MOVES: dict[str, Cell] = {"right": (0, 1), "down": (1, 0), "left": (0, -1), "up": (-1, 0)}


def shortest_path(rows: Sequence[Sequence[str]], start: Cell) -> list[str] | None:
    """The moves of a shortest path from ``start`` to a goal that avoids holes, or None when there is none."""

    def steps(cell: Cell) -> Iterator[tuple[str, Cell]]:
        for move, (dr, dc) in MOVES.items():
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < len(rows) and 0 <= c < len(rows[r]) and rows[r][c] != "H":
                yield move, (r, c)

    return shortest_moves(start, lambda cell: rows[cell[0]][cell[1]] == "G", steps)


def oracle(task_id: int) -> list[str]:
    """The moves that solve task ``task_id``: a shortest path from its start S, at the top left."""
    path = shortest_path(task_map(task_id), (0, 0))
    assert path is not None, f"task {task_id} has no path"  # generate_random_map only draws maps with one
    return path
