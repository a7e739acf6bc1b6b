"""A scripted FrozenLake player that reads only the observations the agent gets.

`FrozenLakeExpert` never sees the server's map or state.  Each turn it reads
the last map printed in the observation (lines of the cells ``P S F H G``
separated by spaces; ``P`` is the player) and, when shown, ``Moves left: N``;
it finds a shortest path from ``P`` to ``G`` around the holes with
`agentgym.frozenlake.plan.shortest_path` and plays its first move.  With no
map or no path in sight it moves ``up`` (`FALLBACK`).

``noise`` in [0, 1] makes a slower player: with that probability (seeded by
``seed``) it takes a detour, a random move other than the planned one onto a
cell that is on the map and not a hole, but only to a cell from which the
goal is still reachable within the moves left after it (the fewer of the
observation's ``Moves left`` and ``max_steps`` minus the actions played).
``noise=0`` is deterministic.
"""

from __future__ import annotations

import re

from ..expert import BudgetedExpert
from ..game import last_grid
from .plan import MOVES, shortest_path

FALLBACK = "up"
_ROW = re.compile(r"^[PSFHG]( [PSFHG])*$")
_MOVES_LEFT = re.compile(r"Moves left: (\d+)")


def read_map(observation: str) -> list[list[str]] | None:
    """The last map printed in ``observation``, as rows of cells, or None."""
    grid = last_grid(observation, _ROW)
    return [line.split() for line in grid] if grid else None


class FrozenLakeExpert(BudgetedExpert):
    """Walks a shortest safe path read off the printed map (see the module docstring)."""

    env_name = "frozenlake"
    default_max_steps = 30

    def act(self, observation: str) -> str:
        rows = read_map(observation)
        at = next(((r, c) for r, row in enumerate(rows or []) for c, cell in enumerate(row) if cell == "P"), None)
        if rows is None or at is None:
            return self._do(FALLBACK, f"I cannot see the map, so I try moving {FALLBACK}.")
        path = shortest_path(rows, at)
        if not path:
            return self._do(FALLBACK, f"I see no safe path to the goal, so I try moving {FALLBACK}.")
        left = _MOVES_LEFT.search(observation)
        budget = self.moves_left(int(left.group(1)) if left else None) - 1
        if self.noisy():
            detours = [m for m in MOVES if m != path[0] and self._fits(rows, at, m, budget)]
            if detours:
                move = self.rng.choice(detours)
                return self._do(move, f"I step {move} onto safe ice; the goal stays within reach.")
        steps = "move" if len(path) == 1 else "moves"
        return self._do(
            path[0], f"The goal is {len(path)} {steps} away on a path around the holes, so I move {path[0]}."
        )

    @staticmethod
    def _fits(rows: list[list[str]], at: tuple[int, int], move: str, budget: int) -> bool:
        """Whether ``move`` from ``at`` lands on safe ice from which the goal takes at most ``budget`` moves."""
        r, c = at[0] + MOVES[move][0], at[1] + MOVES[move][1]
        if not (0 <= r < len(rows) and 0 <= c < len(rows[r])) or rows[r][c] == "H":
            return False
        path = shortest_path(rows, (r, c))
        return path is not None and len(path) <= budget
