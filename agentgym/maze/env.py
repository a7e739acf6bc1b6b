"""The maze game: walk the double-T maze of `agentgym.maze.data` from a task's start to the goal, with words.

* ``reset(task_id)`` puts the walker on the task's start and answers the
  first observation.  Every observation is one line: what happened (absent
  after a reset), the goal and the walker's positions as (row, column), the
  walls on the four sides, and the moves left::

      The goal is at position 8, 6. Your current position is at position 1, 1. There are walls above you, below you,
      to your left. Moves left: 50.

  Walls are named in the order above, below, left, right: ``There is a wall
  above you.``, ``There are walls above you, below you.``, or ``There are no
  walls next to you.``

* ``step(action)``: ``move up``, ``move down``, ``move left`` or ``move
  right`` (case, extra spaces, a missing ``move`` and a trailing full stop
  are ignored) moves one cell: ``You moved right.``, ``You moved down and
  reached the goal.``  A move into a wall (``You cannot move up: there is a
  wall above you. Nothing changed.``) and any other text (``Invalid action
  "jump": the actions are move up, move down, move left and move right.
  Nothing changed.``) leave the walker where it is.  Every action uses one of
  ``MAX_STEPS`` moves.  Reward 1.0 and done on reaching the goal; done with
  0.0 after the last move (``You are out of moves.``); a finished episode's
  observation ends ``The episode is over.``  Stepping a finished episode, or
  one never reset, is `EpisodeStateError`.
"""

from __future__ import annotations

from .. import game
from ..game import StepResult, require_episode, task_of
from .data import GOAL, MAX_STEPS, Cell, is_open, start_of
from .plan import MOVES, SIDES


def parse_move(action: str) -> str | None:
    """``" Move  UP. "`` -> ``"up"``; None for anything that is not a move."""
    return game.parse_move(action, prefixes=("move",))


def describe_walls(cell: Cell) -> str:
    """The sentence naming the walls next to ``cell`` (see the module docstring)."""
    walls = [SIDES[move] for move, (dr, dc) in MOVES.items() if not is_open((cell[0] + dr, cell[1] + dc))]
    if not walls:
        return "There are no walls next to you."
    if len(walls) == 1:
        return f"There is a wall {walls[0]}."
    return f"There are walls {', '.join(walls)}."


class MazeEnv:
    """One walker (see the module docstring)."""

    def __init__(self) -> None:
        self.position: Cell | None = None
        self._observation = ""
        self.done = False
        self.steps = 0

    @property
    def observation(self) -> str:
        """The last observation; `EpisodeStateError` before the first reset."""
        require_episode(self.position is not None, False, "/maze/reset")
        return self._observation

    def reset(self, task_id: int) -> str:
        start = task_of(start_of, task_id)
        self.position, self.done, self.steps = start, False, 0
        return self._observe("")

    def step(self, action: str) -> StepResult:
        require_episode(self.position is not None, self.done, "/maze/reset")
        self.steps += 1
        move, reward = parse_move(action), 0.0
        if move is None:
            message = (
                f'Invalid action "{action.strip()}": the actions are move up, move down, move left and '
                "move right. Nothing changed."
            )
        else:
            dr, dc = MOVES[move]
            target = (self.position[0] + dr, self.position[1] + dc)
            if not is_open(target):
                message = f"You cannot move {move}: there is a wall {SIDES[move]}. Nothing changed."
            elif target == GOAL:
                self.position, reward, self.done = target, 1.0, True
                message = f"You moved {move} and reached the goal."
            else:
                self.position = target
                message = f"You moved {move}."
        if not self.done and self.steps >= MAX_STEPS:
            self.done = True
            message += " You are out of moves."
        return StepResult(self._observe(message), reward, self.done)

    def close(self) -> None:
        self.position, self._observation = None, ""

    def _observe(self, message: str) -> str:
        """What happened, the positions, the walls and the moves left (see the module docstring)."""
        assert self.position is not None
        (row, col), (goal_row, goal_col) = self.position, GOAL
        parts = [message] if message else []
        parts += [
            f"The goal is at position {goal_row}, {goal_col}.",
            f"Your current position is at position {row}, {col}.",
            describe_walls(self.position),
            f"Moves left: {MAX_STEPS - self.steps}.",
        ]
        if self.done:
            parts.append("The episode is over.")
        self._observation = " ".join(parts)
        return self._observation
