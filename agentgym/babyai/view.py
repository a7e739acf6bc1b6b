"""What the BabyAI agent sees, in words: its egocentric 7x7 view (minigrid has no text output).

`look(gym, image)` turns minigrid's partial observation into `Thing`s: every
key, ball, box and door in a visible cell (minigrid's own visibility: walls and
closed doors hide what is behind them), with its offset from the agent in
steps: ``front`` (0 to 6, 0 is the agent's row) and ``right`` (-3 to 3,
negative is to the left).  Things are listed nearest first (by
``front + |right|``, then ``front``, then ``right``) and numbered from 1 within
each colour and type in that order: ``grey key 1``, ``grey key 2``, ``red door 1``.

`describe` writes the view, one sentence a line::

    There is a grey key 1 1 steps in front of you and 1 steps to your left.
    There is a closed red door 1 3 steps in front of you.
    There is a wall directly to your right.
    You are not carrying anything.

Doors carry their state (``open``, ``closed``, ``locked``) before the colour.
With nothing in view the first line is ``You see no objects around you.``; the
wall sentence names the cells next to the agent (in front, left, right) that
are walls, and is absent when there are none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .plan import DIRECTIONS, Cell

OBJECT_TYPES = ("key", "ball", "box", "door")
VIEW_SIZE = 7


@dataclass(frozen=True)
class Thing:
    label: str  # "grey key 1": colour, type and number, as actions name it
    kind: str  # key, ball, box or door
    colour: str
    state: str | None  # a door's open / closed / locked; None for other things
    pos: Cell  # absolute (x, y)
    front: int
    right: int


def visible_cells(gym: Any, image: np.ndarray) -> list[tuple[int, int, Cell]]:
    """``(front, right, (x, y))`` of each visible grid cell; ``image`` is minigrid's observation image."""
    (px, py), (fx, fy) = gym.agent_pos, DIRECTIONS[gym.agent_dir]
    rx, ry = -fy, fx
    cells = []
    for i in range(VIEW_SIZE):
        for j in range(VIEW_SIZE):
            if image[i, j, 0] == 0:  # minigrid encodes hidden cells as "unseen"
                continue
            front, right = VIEW_SIZE - 1 - j, i - VIEW_SIZE // 2
            x, y = px + front * fx + right * rx, py + front * fy + right * ry
            if 0 <= x < gym.width and 0 <= y < gym.height:
                cells.append((front, right, (x, y)))
    return cells


def door_state(obj: Any) -> str:
    return "open" if obj.is_open else "locked" if obj.is_locked else "closed"


def look(gym: Any, image: np.ndarray) -> list[Thing]:
    """The things in view, nearest first and numbered (see the module docstring)."""
    found = []
    for front, right, (x, y) in visible_cells(gym, image):
        obj = gym.grid.get(x, y)
        if (front, right) != (0, 0) and obj is not None and obj.type in OBJECT_TYPES:
            found.append((front + abs(right), front, right, obj, (x, y)))
    found.sort(key=lambda entry: entry[:3])
    counts: dict[tuple[str, str], int] = {}
    things = []
    for _, front, right, obj, pos in found:
        n = counts[(obj.color, obj.type)] = counts.get((obj.color, obj.type), 0) + 1
        state = door_state(obj) if obj.type == "door" else None
        things.append(Thing(f"{obj.color} {obj.type} {n}", obj.type, obj.color, state, pos, front, right))
    return things


def where(front: int, right: int) -> str:
    """``"2 steps in front of you and 1 steps to your left"``."""
    parts = [f"{front} steps in front of you"] if front else []
    if right:
        parts.append(f"{abs(right)} steps to your {'right' if right > 0 else 'left'}")
    return " and ".join(parts)


def thing_sentence(thing: Thing) -> str:
    name = f"{thing.state} {thing.label}" if thing.state else thing.label
    article = "an" if name[0] in "aeiou" else "a"
    return f"There is {article} {name} {where(thing.front, thing.right)}."


def wall_sentence(gym: Any) -> str | None:
    """Which of the cells in front, left and right of the agent are walls, or None."""
    (px, py), (fx, fy) = gym.agent_pos, DIRECTIONS[gym.agent_dir]
    sides = [
        ("in front of you", (px + fx, py + fy)),
        ("to your left", (px + fy, py - fx)),
        ("to your right", (px - fy, py + fx)),
    ]
    walls = [name for name, (x, y) in sides if (cell := gym.grid.get(x, y)) is not None and cell.type == "wall"]
    if not walls:
        return None
    if len(walls) == 1:
        return f"There is a wall directly {walls[0]}."
    return f"There are walls directly {', '.join(walls[:-1])} and {walls[-1]}."


def carrying_sentence(gym: Any) -> str:
    carried = gym.carrying
    return f"You are carrying a {carried.color} {carried.type}." if carried else "You are not carrying anything."


def describe(gym: Any, things: list[Thing]) -> str:
    """The view in words (see the module docstring)."""
    lines = [thing_sentence(t) for t in things] or ["You see no objects around you."]
    walls = wall_sentence(gym)
    return "\n".join([*lines, *([walls] if walls else []), carrying_sentence(gym)])
