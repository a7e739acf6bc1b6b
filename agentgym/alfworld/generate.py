"""ALFWorld-style games generated offline from the room layouts that ship with the ``alfworld`` package.

A generated game is what ALFWorld's benchmark games are: a PDDL problem over
ALFWorld's own domain (``alfworld/data/alfred.pddl``) and its text grammar
(``alfred.twl2``) with the task sentence filled in, played by TextWorld's PDDL
engine.  `generate(task_id)` builds it deterministically (seeded by the task id):

* the task type is ``TASK_TYPES[task_id % 6]``;
* a room (one of the 120 ``FloorPlan<N>`` layouts; kitchens 1-30, living rooms
  201-230, bedrooms 301-330, bathrooms 401-430) of a kind ALFRED allows for that
  type (``alfworld.gen.constants.GOALS_VALID``) that has what the task needs;
* the room's receptacles are the layout's receptacles (``FloorPlan<N>-openable.json``)
  plus the appliances its object list names without a pose (coffee machine,
  stove burner, toaster, garbage can, ...), each at a location of its own;
* the target object type, the lamp of a lamp task and up to 5 other small object
  types of the room's object list get 1 or 2 instances each (the target 1 to 3,
  2 to 3 for the two-object task; the lamp 1), each in a random receptacle that ALFRED says
  can hold it (``VAL_RECEPTACLE_OBJECTS``); desk and floor lamps stand on a piece
  of furniture; no instance of the target starts in a receptacle of the goal's type;
* the goal is ALFRED's goal formula for the type (``alfworld.gen.goal_library``)
  and the task sentence one of its templates, e.g. ``put a clean mug in coffeemachine``;
* the player starts in the middle of the room, at no receptacle.

`game_data(task)` is the game as ALFWorld stores it in ``game.tw-pddl``
(``pddl_domain``, ``grammar``, ``pddl_problem``).  Generating takes milliseconds;
nothing is written to disk.
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
ROOMS = {
    "Kitchen": range(1, 31),
    "LivingRoom": range(201, 231),
    "Bedroom": range(301, 331),
    "Bathroom": range(401, 431),
}
APPLIANCE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
ABILITY = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_STANDS = ("Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "TVStand", "ArmChair", "Sofa")
MAX_INSTANCES = 3
MAX_OTHER_TYPES = 5  # object types besides the task's (the engine's PDDL translation grows with the objects)
DOMAIN_RTYPES = ("SinkBasin", "Microwave", "Fridge")  # the types alfred.pddl names, declared in every problem
DOMAIN_OTYPES = ("Knife", "ButterKnife")


@dataclass(frozen=True)
class Task:
    """One generated game: its type, room, task sentence, targets and PDDL problem."""

    task_id: int
    task_type: str
    scene: str
    goal: str
    object_target: str
    parent_target: str
    toggle_target: str
    pddl_problem: str


def mangle(name: str) -> str:
    """An ALFRED id (``Cabinet|+00.68|+00.50|-02.20``) written as a PDDL name, the way ALFWorld's games write it."""
    for char, word in (("|", "_bar_"), ("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(char, word)
    return name


def receptacle_id(kind: str, coordinates: list[str]) -> str:
    """ALFRED's id of a receptacle of type ``kind`` at ``coordinates``; basins are named after their sink or bathtub
    (``Sink|-01.90|+00.97|-01.50|SinkBasin``), which ALFWorld's names read as ``sinkbasin 1``."""
    base = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}.get(kind)
    return "|".join([base, *coordinates, kind]) if base else "|".join([kind, *coordinates])


def _constants() -> Any:
    import alfworld.gen.constants as constants

    return constants


def layouts_dir() -> Path:
    """The folder of room layouts inside the installed ``alfworld`` package."""
    return Path(_constants().__file__).parent / "layouts"


@functools.lru_cache(maxsize=None)
def scene(scene_number: int) -> tuple[dict[str, tuple[str, str]], tuple[str, ...]]:
    """Room ``FloorPlan<scene_number>``: ({receptacle id: (receptacle type, location name)}, small object types).

    Receptacle ids are ALFRED's (``Sink|-01.90|+00.97|-01.50|SinkBasin``); appliances the room's object list
    names without a pose get ids of their own.  Each receptacle has a location of its own.
    """
    c = _constants()
    folder = layouts_dir()
    poses = json.loads((folder / f"FloorPlan{scene_number}-openable.json").read_text())
    listed = json.loads((folder / f"FloorPlan{scene_number}-objects.json").read_text())
    receptacles: dict[str, tuple[str, str]] = {}
    used: set[str] = set()
    for key in sorted(poses):
        parts = key.split("|")
        kind = parts[4] if len(parts) > 4 else parts[0]
        rid = receptacle_id(kind, parts[1:4])
        x, z, rotation, horizon = poses[key]
        location = f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{int(rotation) // 90 % 4}|{int(horizon)}"
        while location in used:
            location += "|1"
        used.add(location)
        receptacles[rid] = (kind, location)
    have = {kind for kind, _ in receptacles.values()}
    for n, kind in enumerate(sorted(set(listed) & set(c.VAL_RECEPTACLE_OBJECTS) - set(c.MOVABLE_RECEPTACLES) - have)):
        receptacles[receptacle_id(kind, [f"+09.{n:02d}", "+00.00", "+09.00"])] = (kind, f"loc|appliance|{n}")
    holdable = set().union(*c.VAL_RECEPTACLE_OBJECTS.values())
    small = tuple(
        sorted(
            {
                t
                for t in listed
                if (t in holdable and t not in c.VAL_RECEPTACLE_OBJECTS) or t in c.MOVABLE_RECEPTACLES or t in LAMPS
            }
        )
    )
    return receptacles, small


def _holders(kind: str, receptacles: dict[str, tuple[str, str]], avoid: str = "") -> list[str]:
    """Ids of the receptacles that can hold an object of type ``kind`` (none of type ``avoid``)."""
    c = _constants()
    if kind in LAMPS:
        return [r for r, (t, _) in receptacles.items() if t in LAMP_STANDS]
    return [r for r, (t, _) in receptacles.items() if kind in c.VAL_RECEPTACLE_OBJECTS.get(t, ()) and t != avoid]


def _targets(task_type: str, scene_number: int) -> list[tuple[str, str, str]]:
    """Every (object type, goal receptacle type, lamp type) that task type ``task_type`` can use in the room."""
    c = _constants()
    receptacles, small = scene(scene_number)
    kinds = sorted({t for t, _ in receptacles.values()})
    pickable = [o for o in small if o not in LAMPS and _holders(o, receptacles)]
    if task_type == "look_at_obj_in_light":
        lamps = [lamp for lamp in LAMPS if lamp in small and _holders(lamp, receptacles)]
        return [(o, "", lamp) for lamp in lamps for o in pickable]
    appliance = APPLIANCE.get(task_type)
    if appliance and appliance not in kinds:
        return []
    able = c.VAL_ACTION_OBJECTS[ABILITY[task_type]] if appliance else set(pickable)
    return [
        (o, r, "")
        for o in pickable
        if o in able
        for r in kinds
        if r != appliance and o in c.VAL_RECEPTACLE_OBJECTS.get(r, ()) and _holders(o, receptacles, avoid=r)
    ]


def generate(task_id: int) -> Task:
    """The game of task ``task_id`` (any int >= 0; the same game every time)."""
    c = _constants()
    rng = random.Random(f"alfworld-task-{task_id}")
    task_type = TASK_TYPES[task_id % len(TASK_TYPES)]
    rooms = [n for kind in sorted(c.GOALS_VALID[task_type]) for n in ROOMS[kind]]
    while True:
        scene_number = rng.choice(rooms)
        targets = _targets(task_type, scene_number)
        if targets:
            break
    obj, recep, lamp = rng.choice(targets)
    receptacles, small = scene(scene_number)
    others = [k for k in small if k not in LAMPS and k != obj and _holders(k, receptacles)]
    kinds = sorted({obj, lamp, *rng.sample(others, min(MAX_OTHER_TYPES, len(others)))} - {""})
    placed: list[tuple[str, str]] = []  # (object type, receptacle id)
    for kind in kinds:
        holders = _holders(kind, receptacles, avoid=recep if kind == obj else "")
        if kind == obj:
            count = rng.randint(2 if task_type == "pick_two_obj_and_place" else 1, MAX_INSTANCES)
        else:
            count = 1 if kind in LAMPS else rng.randint(1, 2)
        placed += [(kind, rng.choice(holders)) for _ in range(count)]
    template = rng.choice(sorted(_goal_library()[task_type]["templates"]))
    goal = template.format(obj=obj.lower(), recep=recep.lower(), toggle=lamp.lower(), mrecep="")
    problem = _problem(task_id, task_type, obj, recep, lamp, receptacles, placed)
    return Task(task_id, task_type, f"FloorPlan{scene_number}", goal, obj, recep, lamp, problem)


def _goal_library() -> dict[str, Any]:
    import alfworld.gen.goal_library as goal_library

    return goal_library.gdict


def _problem(
    task_id: int,
    task_type: str,
    obj: str,
    recep: str,
    lamp: str,
    receptacles: dict[str, tuple[str, str]],
    placed: list[tuple[str, str]],
) -> str:
    """The PDDL problem: objects, initial facts, and ALFRED's goal formula for the task type."""
    c = _constants()
    start = "loc|start"
    objects: list[tuple[str, str, str]] = []  # (object id, type, receptacle id)
    for n, (kind, holder) in enumerate(placed):
        _, x, y, z = holder.split("|")[:4]
        objects.append((f"{kind}|{x}|{float(y) + 0.01 * (n + 1):+06.2f}|{z}", kind, holder))
    rtypes = sorted({kind for kind, _ in receptacles.values()} | set(DOMAIN_RTYPES))
    otypes = sorted({kind for _, kind, _ in objects} | set(DOMAIN_OTYPES))
    locations = sorted({start} | {loc for _, loc in receptacles.values()})
    declare = (
        ["agent1 - agent"]
        + [f"{mangle(loc)} - location" for loc in locations]
        + [f"{mangle(r)} - receptacle" for r in receptacles]
        + [f"{mangle(o)} - object" for o, _, _ in objects]
        + [f"{t}Type - otype" for t in otypes]
        + [f"{t}Type - rtype" for t in rtypes]
    )
    facts = [f"(atLocation agent1 {mangle(start)})"]
    for rid, (kind, loc) in receptacles.items():
        facts += [f"(receptacleType {mangle(rid)} {kind}Type)", f"(receptacleAtLocation {mangle(rid)} {mangle(loc)})"]
        if kind in c.OPENABLE_CLASS_SET:
            facts.append(f"(openable {mangle(rid)})")
    present = {kind for _, kind, _ in objects}
    for rkind in sorted({k for k, _ in receptacles.values()}):
        held = sorted(present & c.VAL_RECEPTACLE_OBJECTS.get(rkind, set()))
        facts += [f"(canContain {rkind}Type {o}Type)" for o in held]
    for oid, kind, holder in objects:
        name = mangle(oid)
        facts += [
            f"(objectType {name} {kind}Type)",
            f"(inReceptacle {name} {mangle(holder)})",
            f"(objectAtLocation {name} {mangle(receptacles[holder][1])})",
        ]
        if kind in LAMPS:
            facts.append(f"(toggleable {name})")
            continue
        facts.append(f"(pickupable {name})")
        facts += [
            f"({fact} {name})"
            for fact, ability in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable"))
            if kind in c.VAL_ACTION_OBJECTS[ability]
        ]
        if kind in c.MOVABLE_RECEPTACLES:
            facts.append(f"(isReceptacleObject {name})")
    goal = _goal_library()[task_type]["pddl"].format(obj=obj, recep=recep, toggle=lamp, mrecep="").replace("#", "-")
    return (
        "\n".join(
            [
                f"(define (problem generated_{task_id})",
                "(:domain alfred)",
                "(:objects",
                *declare,
                ")",
                "(:init",
                *facts,
                ")",
                goal.strip(),
            ]
        )
        + "\n"
    )


@functools.lru_cache(maxsize=1)
def _logic_files() -> tuple[str, str]:
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    return Path(ALFRED_PDDL_PATH).read_text(), Path(ALFRED_TWL2_PATH).read_text()


def game_data(task: Task) -> dict[str, Any]:
    """``task`` as ALFWorld's ``game.tw-pddl`` holds a game: domain, grammar with the task sentence, problem."""
    domain, grammar = _logic_files()
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", task.goal),
        "pddl_problem": task.pddl_problem,
        "solvable": True,
        "walkthrough": None,
    }
