"""The FrozenLake game: gymnasium's ``FrozenLake-v1`` on a task's map, not slippery, played with words.

* ``reset(task_id)`` builds the gymnasium env on the task's map
  (``data.task_map``) with ``render_mode="ansi"`` and answers the first
  observation.  Every observation is: what happened (one line), the legend,
  the map (gymnasium's ansi rendering with the player's highlighted cell
  written ``P``, cells separated by spaces), and a status line::

      Frozen lake 4x4: walk from the start S to the goal G without stepping into a hole H.
      Legend: P you, S start, F frozen ice (safe), H hole, G goal.
      P F F F
      H H F F
      F H H F
      H F F G
      You are at row 1, column 1; the goal is at row 4, column 4. Moves left: 30.

* ``step(action)``: ``up``, ``down``, ``left`` or ``right`` (case, spaces, a
  ``move `` or ``go `` prefix and a trailing full stop are ignored) moves one
  cell: ``You moved right.``, ``You moved down into a hole.``, ``You moved
  right and reached the goal.``  A move off the map (``You cannot move up:
  the edge of the lake is there. Nothing changed.``) and any other text
  (``Invalid action "jump": the actions are up, down, left and right.
  Nothing changed.``) change nothing.  Every action uses one of
  ``MAX_STEPS`` moves.  Reward 1.0 and done on reaching the goal; done with
  0.0 on falling into a hole or using the last move (``You are out of
  moves.``).  Stepping a finished episode is `EpisodeStateError`.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium

from ..game import StepResult, parse_move, require_episode, task_of
from .data import task_map
from .plan import MOVES

MAX_STEPS = 30
LEGEND = "Legend: P you, S start, F frozen ice (safe), H hole, G goal."
GYM_ACTIONS = {"left": 0, "down": 1, "right": 2, "up": 3}  # FrozenLake-v1's action numbers
_HIGHLIGHT = re.compile(r"\x1b\[\d+m(.)\x1b\[0m")  # the ansi rendering's player cell


class FrozenLakeEnv:
    """One walker (see the module docstring)."""

    def __init__(self) -> None:
        self.gym: Any = None
        self.rows: tuple[str, ...] = ()
        self.observation = ""
        self.done = False
        self.steps = 0

    def reset(self, task_id: int) -> str:
        rows = task_of(task_map, task_id)
        self.close()
        self.gym = gymnasium.make("FrozenLake-v1", desc=list(rows), is_slippery=False, render_mode="ansi")
        self.gym.reset(seed=task_id)
        self.rows, self.done, self.steps = rows, False, 0
        side = len(rows)
        return self._observe(
            f"Frozen lake {side}x{side}: walk from the start S to the goal G without stepping into a hole H."
        )

    def step(self, action: str) -> StepResult:
        require_episode(self.gym is not None, self.done)
        self.steps += 1
        move, reward = parse_move(action), 0.0
        if move is None:
            message = f'Invalid action "{action.strip()}": the actions are up, down, left and right. Nothing changed.'
        elif not self._on_map(move):
            message = f"You cannot move {move}: the edge of the lake is there. Nothing changed."
        else:
            _, gained, terminated, _, _ = self.gym.step(GYM_ACTIONS[move])
            reward, self.done = float(gained), bool(terminated)
            message = (
                f"You moved {move} and reached the goal."
                if reward == 1.0
                else f"You moved {move} into a hole."
                if terminated
                else f"You moved {move}."
            )
        if not self.done and self.steps >= MAX_STEPS:
            self.done = True
            message += " You are out of moves."
        return StepResult(self._observe(message), reward, self.done)

    def close(self) -> None:
        if self.gym is not None:
            self.gym.close()
            self.gym = None

    def position(self) -> tuple[int, int]:
        """The player's (row, column), from 0."""
        return divmod(int(self.gym.unwrapped.s), len(self.rows[0]))

    def _on_map(self, move: str) -> bool:
        (row, col), (dr, dc) = self.position(), MOVES[move]
        return 0 <= row + dr < len(self.rows) and 0 <= col + dc < len(self.rows[0])

    def _observe(self, message: str) -> str:
        """What happened, the legend, the map and the status line (see the module docstring)."""
        rendered = self.gym.render().split("\n")[1:]  # the first line names the last action
        grid = [" ".join(_HIGHLIGHT.sub("P", line)) for line in rendered if line]
        (row, col), side = self.position(), len(self.rows)
        status = (
            f"You are at row {row + 1}, column {col + 1}; the goal is at row {side}, column {side}. "
            f"Moves left: {MAX_STEPS - self.steps}."
        )
        if self.done:
            status += " The episode is over."
        self.observation = "\n".join([message, LEGEND, *grid, status])
        return self.observation
