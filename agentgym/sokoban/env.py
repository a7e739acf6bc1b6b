"""The Sokoban game: one player pushing boxes in a task's room, played with words.

* ``reset(task_id)`` starts the task's level (``data.level``) and answers the
  first observation.  Every observation is: what happened (one line), the
  legend, the room (`data.Board.rows`) and a status line::

      Sokoban room 6x6: push every box onto a target.
      Legend: # wall, _ floor, @ you, $ box, . target, * box on a target, + you on a target.
      # # # # # #
      # _ _ _ _ #
      # . $ # _ #
      # _ _ _ _ #
      # @ _ _ _ #
      # # # # # #
      You are at row 5, column 2. Boxes on targets: 0 of 1. Moves left: 60.

* ``step(action)``: ``up``, ``down``, ``left`` or ``right`` (case, spaces, a
  ``move `` or ``go `` prefix and a trailing full stop are ignored) follows
  `data.advance`: ``You moved up.``, ``You pushed a box up.`` (``... up onto a
  target.``); a move into a wall (``You cannot move up: a wall is there.
  Nothing changed.``), a push against a wall or a box (``You cannot push the
  box up: a wall is behind it. Nothing changed.``) and any other text
  (``Invalid action "jump": the actions are up, down, left and right.
  Nothing changed.``) change nothing.  Every action uses one of ``MAX_STEPS``
  moves.  Reward 1.0 and done when every box is on a target (``Every box is
  on a target.``); done with 0.0 on using the last move (``You are out of
  moves.``).  Stepping a finished episode is `EpisodeStateError`.
"""

from __future__ import annotations

from ..game import StepResult, parse_move, require_episode, task_of
from .data import MOVES, Board, advance, level

MAX_STEPS = 60
LEGEND = "Legend: # wall, _ floor, @ you, $ box, . target, * box on a target, + you on a target."


class SokobanEnv:
    """One player in one room (see the module docstring)."""

    def __init__(self) -> None:
        self.board: Board | None = None
        self.observation = ""
        self.done = False
        self.steps = 0

    def reset(self, task_id: int) -> str:
        self.board = task_of(level, task_id)
        self.done, self.steps = False, 0
        side = self.board.height
        return self._observe(f"Sokoban room {side}x{side}: push every box onto a target.")

    def step(self, action: str) -> StepResult:
        board = self.board
        require_episode(board is not None, self.done)
        self.steps += 1
        move = parse_move(action)
        if move is None:
            message = f'Invalid action "{action.strip()}": the actions are up, down, left and right. Nothing changed.'
        else:
            player, boxes, event = advance(board.walls, board.player, board.boxes, move)
            if event == "wall":
                message = f"You cannot move {move}: a wall is there. Nothing changed."
            elif event == "blocked":
                (dr, dc), (r, c) = MOVES[move], player
                behind = "a wall" if (r + 2 * dr, c + 2 * dc) in board.walls else "another box"
                message = f"You cannot push the box {move}: {behind} is behind it. Nothing changed."
            else:
                onto = " onto a target" if event == "pushed" and boxes - board.boxes <= board.targets else ""
                message = f"You {event} {'a box ' if event == 'pushed' else ''}{move}{onto}."
                self.board = board = Board(board.walls, board.targets, boxes, player, board.height, board.width)
        self.done = board.solved or self.steps >= MAX_STEPS
        if board.solved:
            message += " Every box is on a target."
        elif self.done:
            message += " You are out of moves."
        return StepResult(self._observe(message), 1.0 if board.solved else 0.0, self.done)

    def _observe(self, message: str) -> str:
        """What happened, the legend, the room and the status line (see the module docstring)."""
        board = self.board
        assert board is not None
        row, col = board.player
        status = (
            f"You are at row {row + 1}, column {col + 1}. Boxes on targets: {len(board.boxes & board.targets)} "
            f"of {len(board.boxes)}. Moves left: {MAX_STEPS - self.steps}."
        )
        if self.done:
            status += " The episode is over."
        self.observation = "\n".join([message, LEGEND, *board.rows(), status])
        return self.observation
