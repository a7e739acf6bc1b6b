"""A scripted maze walker that reads only the observations the agent gets.

`MazeExpert` never sees the map.  Each turn it reads from the observation
(`read_view`) the goal's and its own position and the walls next to it, and
adds what it saw to a map it keeps for the episode: the walls, and the open
cells beside it.  It then plans optimistically, as if every cell it has not
seen were open: a shortest path (`agentgym.maze.plan.shortest_path`) from its
position to the goal over the cells not known to be walls, inside the box
around everything it knows (widened when that box holds no path), and plays
its first move.  Each dead end it meets is seen and never planned through
again, so it reaches the goal: on this project's maze from every start, in at
most 13 moves (a shortest path takes at most 12).  With no position in sight
it moves up (`FALLBACK`).

``noise`` in [0, 1] makes a slower walker: with that probability (seeded by
``seed``) it takes a detour, a random move other than the planned one to a
side with no wall, but only while the moves left after it exceed the planned
distance from there by at least ``DETOUR_MARGIN``.  ``noise=0`` is
deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..expert import BudgetedExpert
from .plan import MOVES, SIDES, shortest_path

Cell = tuple[int, int]
DETOUR_MARGIN = 16
FALLBACK = "move up"
_GOAL = re.compile(r"The goal is at position (\d+), (\d+)\.")
_HERE = re.compile(r"Your current position is at position (\d+), (\d+)\.")
_WALLS = re.compile(r"There (?:is a wall|are walls|are no walls next to you)([^.]*)\.")
_MOVES_LEFT = re.compile(r"Moves left: (\d+)")


@dataclass(frozen=True)
class View:
    """What one observation says: the goal, the walker's position, the sides with a wall (moves), moves left."""

    goal: Cell
    position: Cell
    walls: frozenset[str]
    moves_left: int | None


def read_view(observation: str) -> View | None:
    """The last positions and walls given in ``observation``, or None when it gives none."""
    goals, heres, walls = _GOAL.findall(observation), _HERE.findall(observation), _WALLS.findall(observation)
    if not (goals and heres and walls):
        return None
    named = {side.strip() for side in walls[-1].split(",") if side.strip()}
    left = _MOVES_LEFT.findall(observation)
    return View(
        (int(goals[-1][0]), int(goals[-1][1])),
        (int(heres[-1][0]), int(heres[-1][1])),
        frozenset(move for move, side in SIDES.items() if side in named),
        int(left[-1]) if left else None,
    )


def _step(cell: Cell, move: str) -> Cell:
    return cell[0] + MOVES[move][0], cell[1] + MOVES[move][1]


class MazeExpert(BudgetedExpert):
    """Walks to the goal, mapping the walls it meets (see the module docstring)."""

    env_name = "maze"
    default_max_steps = 50

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.walls: set[Cell] = set()
        self.seen: set[Cell] = set()

    def act(self, observation: str) -> str:
        view = read_view(observation)
        if view is None:
            return self._do(FALLBACK, "I cannot tell where I am, so I try moving up.")
        self._learn(view)
        path = self.plan(view.position, view.goal)
        if not path:
            return self._do(FALLBACK, "I see no way to the goal, so I try moving up.")
        left = self.moves_left(view.moves_left)
        if self.noisy():
            detours = [
                m
                for m in MOVES
                if m != path[0] and m not in view.walls and self._fits(_step(view.position, m), view.goal, left - 1)
            ]
            if detours:
                move = self.rng.choice(detours)
                return self._do(
                    f"move {move}",
                    f"There is no wall {SIDES[move]}, so I look around by moving {move}; the goal stays within reach.",
                )
        unseen = any(cell not in self.seen for cell in self._cells(view.position, path))
        way = "through corridors I have not seen yet" if unseen else "through corridors I have seen"
        steps = "move" if len(path) == 1 else "moves"
        thought = (
            f"The goal at {view.goal[0]}, {view.goal[1]} is at least {len(path)} {steps} away {way}, so I "
            f"move {path[0]}."
        )
        return self._do(f"move {path[0]}", thought)

    def plan(self, start: Cell, goal: Cell) -> list[str] | None:
        """A shortest path from ``start`` to ``goal`` through every cell not known to be a wall (see the docstring)."""
        known = self.walls | self.seen | {start, goal}
        rows, cols = [r for r, _ in known], [c for _, c in known]
        for pad in (1, 2, 4, 8, 16, 32):
            top, bottom, left, right = min(rows) - pad, max(rows) + pad, min(cols) - pad, max(cols) + pad

            def passable(cell: Cell, top=top, bottom=bottom, left=left, right=right) -> bool:
                return cell not in self.walls and top <= cell[0] <= bottom and left <= cell[1] <= right

            path = shortest_path(passable, start, goal)
            if path is not None:
                return path
        return None

    def _learn(self, view: View) -> None:
        self.seen.add(view.position)
        for move in MOVES:
            (self.walls if move in view.walls else self.seen).add(_step(view.position, move))

    def _fits(self, cell: Cell, goal: Cell, budget: int) -> bool:
        path = self.plan(cell, goal)
        return path is not None and budget - len(path) >= DETOUR_MARGIN

    @staticmethod
    def _cells(start: Cell, path: list[str]) -> list[Cell]:
        cells, cell = [], start
        for move in path:
            cell = _step(cell, move)
            cells.append(cell)
        return cells
