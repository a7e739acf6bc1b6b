"""Sokoban's board and rules, the level generator, and the train / dev / test splits.

Public API (pure Python, no server imports)::

    from agentgym.sokoban.data import Board, advance, parse_board, level, task_ids, task_list
    board = level(7)             # task 7's start Board, generated (about 20 ms) once per process, then cached
    board.rows()                 # ['# # # # # # #', '# _ @ _ _ _ #', ...]
    advance(board.walls, board.player, board.boxes, "up")   # -> (player, boxes, event)
    task_ids("test")             # [0, ..., 199]; "dev" 200-299; "train" 300-1299

Cells are (row, column) from 0 at the top left.  The board's text, one row a
line, cells separated by spaces: ``#`` wall, ``_`` floor, ``@`` player, ``$``
box, ``.`` target, ``*`` box on a target, ``+`` player on a target.

The rule (`advance`): the player moves one cell; into a wall it does not
(``"wall"``); into a box it pushes the box one cell further when that cell is
free (not a wall, not another box: ``"pushed"``), else nothing moves
(``"blocked"``); into a free cell it moves (``"moved"``).  Boxes are never
pulled.  A board is solved when every box is on a target.

Levels: task ``i`` (``0 <= i < NUM_TASKS``) is a square room of side
``6 + i % 2`` (walls included) with ``1 + i // 2 % 2`` boxes, drawn by
``random.Random(i)``: up to ``MAX_INNER_WALLS`` inner walls, then targets,
boxes and the player on distinct free cells; a draw is kept when
`agentgym.sokoban.plan.solve` solves it in ``MIN_MOVES`` to ``MAX_MOVES``
moves (so within the env's step limit), else drawn again.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Sequence

from ..splits import Split, task_ids_by_split

Cell = tuple[int, int]
NUM_TASKS = 1300
SPLITS: dict[str, range] = {"test": range(0, 200), "dev": range(200, 300), "train": range(300, NUM_TASKS)}
MOVES: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
MAX_INNER_WALLS = 2
MIN_MOVES, MAX_MOVES = 8, 40
MAX_DRAWS = 1000
_CHARS = {"#", "_", "@", "$", ".", "*", "+"}


def advance(
    walls: frozenset[Cell], player: Cell, boxes: frozenset[Cell], move: str
) -> tuple[Cell, frozenset[Cell], str]:
    """The player's ``move`` under the rule (see the module docstring): (player, boxes, event)."""
    dr, dc = MOVES[move]
    to = (player[0] + dr, player[1] + dc)
    if to in walls:
        return player, boxes, "wall"
    if to not in boxes:
        return to, boxes, "moved"
    beyond = (to[0] + dr, to[1] + dc)
    if beyond in walls or beyond in boxes:
        return player, boxes, "blocked"
    return to, (boxes - {to}) | {beyond}, "pushed"


@dataclass(frozen=True)
class Board:
    """A room: its walls and targets, where the boxes and the player are, and its size."""

    walls: frozenset[Cell]
    targets: frozenset[Cell]
    boxes: frozenset[Cell]
    player: Cell
    height: int
    width: int

    @property
    def solved(self) -> bool:
        return self.boxes <= self.targets

    def rows(self) -> list[str]:
        """The board's text, one string a row (see the module docstring)."""
        return [" ".join(self._char((r, c)) for c in range(self.width)) for r in range(self.height)]

    def _char(self, cell: Cell) -> str:
        if cell in self.walls:
            return "#"
        on_target = cell in self.targets
        if cell == self.player:
            return "+" if on_target else "@"
        if cell in self.boxes:
            return "*" if on_target else "$"
        return "." if on_target else "_"


def parse_board(rows: Sequence[str]) -> Board:
    """`Board.rows` text back to a `Board`; ValueError unless it has known cells, one player and as many targets as
    boxes (at least one)."""
    grid = [row.split() for row in rows]
    cells = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
    if not cells or set(cells.values()) - _CHARS:
        raise ValueError(f"a board is rows of the cells {' '.join(sorted(_CHARS))}")

    def at(*chars: str) -> frozenset[Cell]:
        return frozenset(cell for cell, ch in cells.items() if ch in chars)

    players, boxes, targets = at("@", "+"), at("$", "*"), at(".", "*", "+")
    if len(players) != 1 or not boxes or len(boxes) != len(targets):
        raise ValueError("a board has one player and as many targets as boxes")
    return Board(at("#"), targets, boxes, next(iter(players)), len(grid), max(len(row) for row in grid))


def room_shape(task_id: int) -> tuple[int, int]:
    """Task ``task_id``'s (side of the room, number of boxes)."""
    return 6 + task_id % 2, 1 + task_id // 2 % 2


@functools.lru_cache(maxsize=2048)
def level(task_id: int) -> Board:
    """Task ``task_id``'s start board (see the module docstring); ValueError unless ``0 <= task_id < NUM_TASKS``."""
    if not 0 <= task_id < NUM_TASKS:
        raise ValueError(f"data_idx {task_id} out of range: expected 0 <= data_idx < {NUM_TASKS}")
    from .plan import solve  # imported here: plan imports this module

    side, n_boxes = room_shape(task_id)
    rng = random.Random(task_id)
    everything = [(r, c) for r in range(side) for c in range(side)]
    border = frozenset(cell for cell in everything if {0, side - 1} & set(cell))
    interior = [cell for cell in everything if cell not in border]
    for _ in range(MAX_DRAWS):
        walls = border | set(rng.sample(interior, rng.randint(0, MAX_INNER_WALLS)))
        cells = rng.sample([cell for cell in interior if cell not in walls], 2 * n_boxes + 1)
        board = Board(walls, frozenset(cells[:n_boxes]), frozenset(cells[n_boxes:-1]), cells[-1], side, side)
        moves = solve(board)
        if moves is not None and MIN_MOVES <= len(moves) <= MAX_MOVES:
            return board
    raise RuntimeError(f"no level drawn for task {task_id} in {MAX_DRAWS} draws")


task_ids = task_ids_by_split(SPLITS)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, "push 2 boxes onto targets in a 7x7 room")]`` of ``split``: the env's task list."""
    shapes = {i: room_shape(i) for i in task_ids(split)}
    what = {1: "push 1 box onto a target", 2: "push 2 boxes onto targets"}
    return [(i, f"{what[boxes]} in a {side}x{side} room") for i, (side, boxes) in shapes.items()]
