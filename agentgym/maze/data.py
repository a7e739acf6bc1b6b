"""Maze's one map, its start positions, and the train / dev / test splits.

Public API (pure Python)::

    from agentgym.maze.data import MAZE, GOAL, STARTS, start_of, task_ids, task_list
    start_of(0)          # (1, 1): the start position of task 0
    task_ids("test")     # [0, ..., 25]: every start once; "dev" 26-51; "train" 52-259

The map is a double-T maze of 10 rows by 13 columns (``#`` wall, ``.`` open,
``G`` the goal); positions are (row, column), counted from 0 at the top left,
so ``up`` lowers the row and ``left`` the column::

              column  0 1 2 3 4 5 6 7 8 9 10 11 12
        row 0         # # # # # # # # # # #  #  #
        row 1         # . . . . . # . . . .  .  #     two top bars, split by the wall at (1, 6)
        row 2         # # # . # # # # # . #  #  #
        row 3         # # # . # # # # # . #  #  #     their two stems, columns 3 and 9
        row 4         # # # . # # # # # . #  #  #
        row 5         # # # . # # # # # . #  #  #
        row 6         # # # . . . . . . . #  #  #     the cross bar joining the stems
        row 7         # # # # # # . # # # #  #  #
        row 8         # # # # # # G # # # #  #  #     the goal, at the foot of the last stem
        row 9         # # # # # # # # # # #  #  #

Its open cells other than the goal are exactly 26: the ``STARTS``, in reading
order (row by row, left to right).  The longest shortest paths, from the ends
of the top bars ((1, 1), (1, 5), (1, 7), (1, 11)), take 12 moves, well within
the 50 moves an episode allows.

Tasks: task ``t`` (``0 <= t < NUM_TASKS``) starts at ``STARTS[t % 26]``; there
is nothing else to vary, so the ids past 25 are repeats.  The test split is
every start once (ids 0-25, the ``game`` numbers upstream evaluates), dev one
more round (26-51) and train eight more (52-259).  The splits are disjoint as
ids, not as episodes: the maze is one fixed map, so every split walks the same
corridors and the test split measures reaching the goal from every start.
"""

from __future__ import annotations

from ..splits import Split, task_ids_by_split

Cell = tuple[int, int]

MAZE: tuple[str, ...] = (
    "#############",
    "#.....#.....#",
    "###.#####.###",
    "###.#####.###",
    "###.#####.###",
    "###.#####.###",
    "###.......###",
    "######.######",
    "######G######",
    "#############",
)
GOAL: Cell = (8, 6)
STARTS: tuple[Cell, ...] = tuple((r, c) for r, row in enumerate(MAZE) for c, cell in enumerate(row) if cell == ".")
ROUNDS = {"test": 1, "dev": 1, "train": 8}
NUM_TASKS = len(STARTS) * sum(ROUNDS.values())
SPLITS: dict[str, range] = {
    "test": range(0, len(STARTS)),
    "dev": range(len(STARTS), 2 * len(STARTS)),
    "train": range(2 * len(STARTS), NUM_TASKS),
}
MAX_STEPS = 50


def is_open(cell: Cell) -> bool:
    """Whether ``cell`` is on the map and not a wall."""
    r, c = cell
    return 0 <= r < len(MAZE) and 0 <= c < len(MAZE[r]) and MAZE[r][c] != "#"


def start_of(task_id: int) -> Cell:
    """Task ``task_id``'s start position; ValueError unless ``0 <= task_id < NUM_TASKS``."""
    if not 0 <= task_id < NUM_TASKS:
        raise ValueError(f"game {task_id} out of range: expected 0 <= game < {NUM_TASKS}")
    return STARTS[task_id % len(STARTS)]


task_ids = task_ids_by_split(SPLITS)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, "walk from position 1, 1 to the goal at position 8, 6")]`` of ``split``."""
    return [
        (i, f"walk from position {start_of(i)[0]}, {start_of(i)[1]} to the goal at position {GOAL[0]}, {GOAL[1]}")
        for i in task_ids(split)
    ]
