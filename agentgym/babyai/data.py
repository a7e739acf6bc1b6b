"""BabyAI's tasks: task id -> (minigrid level, seed), and the train / dev / test splits.

Public API (pure Python: minigrid is not imported here)::

    from agentgym.babyai.data import LEVELS, gym_id, task_level, task_ids, task_list
    task_level(0)        # ('GoToRedBallGrey', 0): level name and seed
    gym_id(3)            # 'BabyAI-GoToObjS6-v1', the id gymnasium makes for task 3
    task_ids("test")     # [0, ..., 199]; "dev" 200-399; "train" 400-3999

The level table is AgentGym's: its 40 BabyAI levels, in AgentGym's order, which
runs from the simplest navigation (``GoToRedBallGrey``) through the GoTo, Open,
Pickup, PutNext, Unlock and bonus levels to the synthesised ones
(``SynthS5R2`` ... ``BossLevel``, ``BossLevelNoUnlock``).  AgentGym numbers the
table from 1 and plays level ``levels[data_idx % 40 + 1]`` with seed
``data_idx // 40``; `LEVELS` is the same table from 0, so task ``i`` is level
``LEVELS[i % 40]`` with seed ``i // 40``: tasks 0-39 are the 40 levels with
seed 0, tasks 40-79 the same levels with seed 1, and so on.

Each name is minigrid's ``BabyAI-<name>-v0``, all registered by
``minigrid==3.2.0`` except one: minigrid has no ``GoToObjS6-v0`` any more (its
room size was fixed in a new version), so task ``3 + 40k`` plays
``BabyAI-GoToObjS6-v1`` (`GYM_VERSIONS`).  The table is kept in AgentGym's
order (not sorted), so that a task id names the same level and seed as
upstream's ``data_idx``.

A known limit of minigrid 3.2.0, not of this env: in ``OpenDoorsOrderN4Debug``
a two-door mission (``open the X door, then open the Y door`` or ``... after
you ...``) always fails when the first door is opened (its strict verifier
checks that same toggle against the second door too), so those tasks cannot
be won; its one-door missions can.

There are ``NUM_TASKS = 40 * 100`` tasks (seeds 0-99).  The splits are disjoint
blocks of whole seeds, so each holds every level equally often: test ids 0-199
(seeds 0-4), dev 200-399 (seeds 5-9), train 400-3999 (seeds 10-99).
"""

from __future__ import annotations

from ..splits import Split, task_ids_by_split

LEVELS: tuple[str, ...] = (
    "GoToRedBallGrey",
    "GoToRedBall",
    "GoToRedBallNoDists",
    "GoToObjS6",
    "GoToLocalS8N7",
    "GoToObjMazeS7",
    "GoToImpUnlock",
    "GoToSeqS5R2",
    "GoToRedBlueBall",
    "GoToDoor",
    "GoToObjDoor",
    "Open",
    "OpenRedDoor",
    "OpenDoorLoc",
    "OpenRedBlueDoorsDebug",
    "OpenDoorsOrderN4Debug",
    "Pickup",
    "UnblockPickup",
    "PickupLoc",
    "PickupDistDebug",
    "PickupAbove",
    "PutNextLocalS6N4",
    "PutNextS7N4Carrying",
    "Unlock",
    "UnlockLocalDist",
    "KeyInBox",
    "UnlockPickupDist",
    "BlockedUnlockPickup",
    "UnlockToUnlock",
    "ActionObjDoor",
    "FindObjS7",
    "KeyCorridorS6R3",
    "OneRoomS20",
    "MoveTwoAcrossS8N9",
    "SynthS5R2",
    "SynthLoc",
    "SynthSeq",
    "MiniBossLevel",
    "BossLevel",
    "BossLevelNoUnlock",
)
NUM_LEVELS = len(LEVELS)
GYM_VERSIONS: dict[str, str] = {"GoToObjS6": "v1"}  # levels whose AgentGym version (v0) minigrid no longer has
NUM_SEEDS = 100
NUM_TASKS = NUM_LEVELS * NUM_SEEDS
SPLITS: dict[str, range] = {"test": range(0, 200), "dev": range(200, 400), "train": range(400, NUM_TASKS)}


def check_task_id(task_id: int) -> None:
    """ValueError unless ``0 <= task_id < NUM_TASKS``."""
    if not 0 <= task_id < NUM_TASKS:
        raise ValueError(f"data_idx {task_id} out of range: expected 0 <= data_idx < {NUM_TASKS}")


def task_level(task_id: int) -> tuple[str, int]:
    """Task ``task_id``'s (level name, seed); ValueError unless it is a task id."""
    check_task_id(task_id)
    return LEVELS[task_id % NUM_LEVELS], task_id // NUM_LEVELS


def gym_id(task_id: int) -> str:
    """The gymnasium id of task ``task_id``'s level, e.g. ``BabyAI-GoToRedBall-v0``."""
    level, _ = task_level(task_id)
    return f"BabyAI-{level}-{GYM_VERSIONS.get(level, 'v0')}"


task_ids = task_ids_by_split(SPLITS)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, "BabyAI level GoToRedBall, seed 0")]`` of ``split``: the env's task list for datasets."""
    return [(i, "BabyAI level {}, seed {}".format(*task_level(i))) for i in task_ids(split)]
