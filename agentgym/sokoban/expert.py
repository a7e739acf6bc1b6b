"""A scripted Sokoban player that reads only the observations the agent gets.

`SokobanExpert` never sees the server's board.  Each turn it reads the last
room printed in the observation (lines of the cells ``# _ @ $ . * +``
separated by spaces, `agentgym.sokoban.data.parse_board`) and, when shown,
``Moves left: N``.  It solves the room with `agentgym.sokoban.plan.solve`
(a shortest move list) and plays it move by move, solving again only when
the room it reads is not the one its last move should have left.  With no
room or no solution in sight it moves ``up`` (`FALLBACK`).

``noise`` in [0, 1] makes a slower player: with that probability (seeded by
``seed``) it takes a detour, a random walk (not a push) other than the
planned move, but only to a position from which the room is still solved
within the moves left after it (the fewer of the observation's ``Moves left``
and ``max_steps`` minus the actions played).  ``noise=0`` is deterministic.
"""

from __future__ import annotations

import re

from ..expert import BudgetedExpert
from ..game import last_grid
from .data import MOVES, Board, advance, parse_board
from .plan import solve

FALLBACK = "up"
_ROW = re.compile(r"^[#_@$.*+]( [#_@$.*+])*$")
_MOVES_LEFT = re.compile(r"Moves left: (\d+)")


def read_board(observation: str) -> Board | None:
    """The last room printed in ``observation``, or None."""
    grid = last_grid(observation, _ROW)
    try:
        return parse_board(grid) if grid else None
    except ValueError:
        return None


def _after(board: Board, move: str) -> tuple[Board, str]:
    player, boxes, event = advance(board.walls, board.player, board.boxes, move)
    return Board(board.walls, board.targets, boxes, player, board.height, board.width), event


class SokobanExpert(BudgetedExpert):
    """Plays a shortest solution of the printed room (see the module docstring)."""

    env_name = "sokoban"
    default_max_steps = 60

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.plan: list[str] | None = None  # moves not yet played
        self.expected: Board | None = None  # the room the last move should leave

    def act(self, observation: str) -> str:
        board = read_board(observation)
        if board is None:
            return self._do(FALLBACK, f"I cannot see the room, so I try moving {FALLBACK}.")
        if board != self.expected:
            self.plan = solve(board)
        if not self.plan:
            self.expected = None
            return self._do(FALLBACK, f"I see no way to put every box on a target, so I try moving {FALLBACK}.")
        left = _MOVES_LEFT.search(observation)
        budget = self.moves_left(int(left.group(1)) if left else None) - 1
        if self.noisy():
            detours = []
            for move in MOVES:
                after, event = _after(board, move)
                plan = solve(after) if move != self.plan[0] and event == "moved" else None
                if plan is not None and len(plan) <= budget:
                    detours.append((move, after, plan))
            if detours:
                move, self.expected, self.plan = self.rng.choice(detours)
                return self._do(move, f"I step {move} first; every box can still reach a target in time.")
        move = self.plan.pop(0)
        self.expected, event = _after(board, move)
        return self._do(move, self._thought(move, event, self.expected))

    def _thought(self, move: str, event: str, after: Board) -> str:
        remaining = len(self.plan or [])
        more = f"my plan has {remaining} more move{'s' * (remaining != 1)}"
        if event == "moved":
            return f"I walk {move} to get into position; {more} after this one."
        if after.solved:
            return f"I push the last box {move} onto its target."
        return f"I push a box {move}; {more} to put every box on a target."
