"""Solve a Sokoban board by breadth-first search over (player, boxes) states.

`solve(board)` answers a shortest list of moves (``up``, ``down``, ``left``,
``right``) that puts every box on a target under `data.advance`'s rule, or
None when no sequence does.  Rooms here are small (at most 25 inner cells and
2 boxes: under 8,000 states).  `oracle(task_id)` is the solution of the
task's level: the reference solution the tests play.
"""

from __future__ import annotations

from typing import Iterator

from ..paths import shortest_moves
from .data import MOVES, Board, Cell, advance, level

State = tuple[Cell, frozenset[Cell]]


def solve(board: Board) -> list[str] | None:
    """A shortest move list that solves ``board``, or None."""

    def steps(state: State) -> Iterator[tuple[str, State]]:
        for move in MOVES:
            player, boxes, event = advance(board.walls, *state, move)
            if event in ("moved", "pushed"):
                yield move, (player, boxes)

    return shortest_moves((board.player, board.boxes), lambda state: state[1] <= board.targets, steps)


def oracle(task_id: int) -> list[str]:
    """The moves that solve task ``task_id``: a shortest solution of its level."""
    moves = solve(level(task_id))
    assert moves is not None, f"task {task_id} has no solution"  # reverse play only draws solvable levels
    return moves
