"""A scripted BabyAI player that reads only the observations the agent gets.

`BabyAIExpert` never sees the level.  Each turn it reads the observation
(`read_view`: the event line, ``Your goal:``, the things in view with their
offsets, what it carries and ``Available actions``) and plays one of the
listed actions:

* The mission becomes a list of steps (`parse_mission`): ``A, then B`` and
  ``A and B`` keep their order, ``A after you B`` plays B first.  A step is
  ``go to``, ``pick up``, ``open`` or ``put X next to Y`` with object
  descriptions (colour, type, location).  A step counts as done when the
  action meant to finish it succeeds (its event line is not a refusal); when
  every step is done and the mission goes on, it tries the last step on
  another fitting object.
* It sketches what it has seen (`Frame`): its pose and the things' cells in
  one frame of reference, exact through turns and single moves; after a
  ``go to`` or ``pickup`` it finds its new pose by matching the new view with
  the sketch (when that is unclear it starts a new sketch and goes back to the
  old one as soon as a later view fits it), and after going through a door
  it starts a new sketch.  A mission location (``on your left``...) is
  checked in the sketch of the start pose.
* A step's target in view is used by name: ``go to``; ``pickup`` (dropping
  what it carries first); ``go to`` then ``toggle`` for a door (fetching the
  key first when it is locked); for ``put``: pick up, ``go to`` the fixed
  object, step aside and ``drop`` next to it.  A target remembered but out of
  view is turned towards; a thing next to an unreachable door, or right in
  front when it cannot move on, is picked up and put aside.
* With no target known it explores: it turns left three times to look
  around, then unlocks a door with the key it carries, fetches the key of a
  locked door it has seen, goes through a door (closed ones first, the least
  used colour first; back the way it came only once it has looked around
  from two spots), opens a box when it needs a key, or walks towards the side
  it has looked at least.

Maze levels can still run out of steps.  ``noise`` in [0, 1] makes a slower
player: with that probability (seeded by ``seed``) it turns or moves at
random instead.  ``noise=0`` is deterministic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable

from ..expert import Expert

_THING = re.compile(r"^There is an? (?:(open|closed|locked) )?(\w+) (key|ball|box|door) (\d+) (.*)\.$")
_FRONT = re.compile(r"(\d+) steps in front of you")
_SIDE = re.compile(r"(\d+) steps to your (left|right)")
_CARRY = re.compile(r"^You are carrying an? (\w+) (\w+)\.$")
_DESC = (
    r"(?:the|a) (?:(red|green|blue|purple|yellow|grey) )?(key|ball|box|door|object)"
    r"(?: (in front of you|behind you|on your left|on your right))?"
)
_LOCS = {"in front of you": "front", "behind you": "behind", "on your left": "left", "on your right": "right"}
_STEP = {verb: re.compile(rf"^{verb} {_DESC}$") for verb in ("go to", "pick up", "open")}
_PUT = re.compile(rf"^put {_DESC} next to {_DESC}$")
_UNLOCKED = re.compile(r"^You unlocked (\w+) door")
NEXT_TO_FIXED = {(2, 0), (1, 1), (1, -1)}  # offsets of a thing next to the cell in front of the agent
SCAN_TURNS = 3
MAX_CLEARINGS = 3  # obstacles it moves in one sketch at most
SEEK_THOUGHT = "I saw what I need over there"
MAX_FORWARD = 3
# from facing put's fixed object: ways to stand with a free cell next to it in front (left, right, back off)
SIDESTEPS = (
    ("turn left", "move forward", "turn right"),
    ("turn right", "move forward", "turn left"),
    ("turn left", "turn left", "move forward", "turn left", "turn left"),
)


@dataclass(frozen=True)
class Seen:
    label: str  # "grey key 1"
    kind: str
    colour: str
    state: str | None
    front: int
    right: int


@dataclass
class View:
    event: str | None
    mission: str
    things: list[Seen]
    carrying: tuple[str, str] | None  # (colour, kind)
    actions: list[str]


def read_view(observation: str) -> View | None:
    """The parts of one observation; None when it has no ``Your goal:`` line."""
    lines = [line.strip() for line in observation.strip().splitlines()]
    goal_at = next((i for i, line in enumerate(lines) if line.startswith("Your goal: ")), None)
    if goal_at is None:
        return None
    view = View(" ".join(lines[:goal_at]) or None, lines[goal_at].removeprefix("Your goal: "), [], None, [])
    for line in lines[goal_at + 1 :]:
        if thing := _THING.match(line):
            state, colour, kind, n, where = thing.groups()
            front, side = _FRONT.search(where), _SIDE.search(where)
            right = (int(side.group(1)) * (1 if side.group(2) == "right" else -1)) if side else 0
            view.things.append(
                Seen(f"{colour} {kind} {n}", kind, colour, state, int(front.group(1)) if front else 0, right)
            )
        elif carry := _CARRY.match(line):
            view.carrying = (carry.group(1), carry.group(2))
        elif line.startswith("Available actions: "):
            try:
                view.actions = [str(a) for a in json.loads(line.removeprefix("Available actions: "))]
            except ValueError:
                view.actions = []
    return view


@dataclass(frozen=True)
class Desc:
    colour: str | None
    kind: str | None  # None: any object ("object")
    loc: str | None  # front, behind, left or right of the start pose

    def matches(self, colour: str, kind: str) -> bool:
        kind_ok = kind == self.kind if self.kind else kind != "door"
        return kind_ok and (self.colour is None or colour == self.colour)

    def words(self) -> str:
        return " ".join(w for w in (self.colour, self.kind or "object") if w)


@dataclass(frozen=True)
class Step:
    verb: str  # go to, pick up, open, put
    desc: Desc
    fixed: Desc | None = None  # put's object to stand next to


def _desc(colour: str | None, kind: str, loc: str | None) -> Desc:
    return Desc(colour, None if kind == "object" else kind, _LOCS.get(loc) if loc else None)


def parse_mission(mission: str) -> list[Step]:
    """The mission's steps in the order to play them; [] when it does not parse."""
    text = " ".join(mission.lower().split()).rstrip(".")
    if ", then " in text:
        first, second = text.split(", then ", 1)
    elif " after you " in text:
        second, first = text.split(" after you ", 1)
    else:
        first, second = text, ""
    steps = []
    for part in [p for half in (first, second) if half for p in half.split(" and ")]:
        if put := _PUT.match(part):
            g = put.groups()
            steps.append(Step("put", _desc(*g[:3]), _desc(*g[3:])))
            continue
        for verb, pattern in _STEP.items():
            if match := pattern.match(part):
                steps.append(Step(verb, _desc(*match.groups())))
                break
        else:
            return []
    return steps


Vec = tuple[int, int]
Pose = tuple[Vec, Vec]  # (position, heading) in a frame whose first heading is (1, 0): (steps ahead, steps right)
HEADINGS: tuple[Vec, ...] = ((1, 0), (0, 1), (-1, 0), (0, -1))
Action = tuple[str, str]  # (action, thought)


def _left(h: Vec) -> Vec:
    return h[1], -h[0]


def _right(h: Vec) -> Vec:
    return -h[1], h[0]


def _moved(pose: Pose, action: str) -> Pose:
    """``pose`` after ``turn left``, ``turn right`` or ``move forward``."""
    (x, y), heading = pose
    if action == "move forward":
        return (x + heading[0], y + heading[1]), heading
    return (x, y), _left(heading) if action == "turn left" else _right(heading)


def _place(pose: Pose, front: int, right: int) -> Vec:
    """The cell ``front`` steps ahead and ``right`` steps right of ``pose``."""
    (x, y), heading = pose
    side = _right(heading)
    return x + front * heading[0] + right * side[0], y + front * heading[1] + right * side[1]


def _compose(origin: Pose, pose: Pose) -> Pose:
    """``pose``, given in the frame whose origin is ``origin``, in ``origin``'s own frame."""
    (a, b), (h0, h1) = pose
    side = _right(origin[1])
    return _place(origin, a, b), (h0 * origin[1][0] + h1 * side[0], h0 * origin[1][1] + h1 * side[1])


def _offset(pose: Pose, cell: Vec) -> Vec:
    """(front, right) of ``cell`` seen from ``pose``."""
    (x, y), heading = pose
    dx, dy, side = cell[0] - x, cell[1] - y, _right(heading)
    return dx * heading[0] + dy * heading[1], dx * side[0] + dy * side[1]


@dataclass
class Frame:
    """The expert's sketch of the level around it, in one frame of reference, until a long move loses the frame."""

    pose: Pose = ((0, 0), (1, 0))
    is_start: bool = True  # the frame of the start pose, in which mission locations are meant
    things: dict[Vec, tuple[str, str, str | None]] = field(default_factory=dict)  # cell -> (colour, kind, state)
    came_from: Vec | None = None  # the door just gone through
    scanned: set[Vec] = field(default_factory=set)  # where it looked around
    blocked: set[Pose] = field(default_factory=set)  # poses from which it could not move forward
    given_up: set[Vec] = field(default_factory=set)  # cells given up on until seen again
    wrong: set[Vec] = field(default_factory=set)  # targets that did not complete the mission

    def where(self, thing: Seen) -> Vec:
        return _place(self.pose, thing.front, thing.right)

    def give_up(self, cell: Vec) -> None:
        """Stop aiming at ``cell`` until it is seen again (no way there, or nothing there after all)."""
        self.given_up.add(cell)

    def usable(self, cell: Vec) -> bool:
        return cell not in self.wrong and cell not in self.given_up

    def record(self, view: View) -> None:
        for thing in view.things:
            self.things[self.where(thing)] = (thing.colour, thing.kind, thing.state)
            self.given_up.discard(self.where(thing))


@dataclass
class GridMemory:
    """What the expert keeps within an episode."""

    mission: str = ""
    steps: list[Step] = field(default_factory=list)
    done: int = 0  # steps finished
    finishing: str | None = None  # the event prefix that will finish the current step
    target: Vec | None = None  # the cell the finishing action aims at
    frame: Frame = field(default_factory=Frame)
    scans: int = 0  # left turns made to look around here
    forwards: int = 0  # forward moves made while exploring since the last look around
    seek_turns: int = 0  # turns made towards a remembered thing out of view
    sidestep: list[str] = field(default_factory=list)  # queued actions to drop next to put's fixed object
    sidestep_tries: int = 0  # SIDESTEPS tried since picking up put's object
    putting_down: bool = False  # looking for a free cell to put down what it carries
    put_turns: int = 0  # turns made since then without moving
    clearing: Vec | None = None  # an obstacle to pick up and put aside once the hands are free
    cleared_for: Vec | None = None  # the door whose way it clears: nothing is put down next to it
    locked: set[str] = field(default_factory=set)  # colours of locked doors seen
    doors_used: dict[str, int] = field(default_factory=dict)
    pending: tuple[Frame, list[Pose]] | None = None  # the lost sketch and the poses its new origin may have there
    clearings: int = 0  # obstacles moved in this sketch
    last: str = ""
    last_view: View | None = None


class BabyAIExpert(Expert):
    """Plays BabyAI missions from the observation text (see the module docstring)."""

    env_name = "babyai"

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.memory = GridMemory()

    # ------------------------------------------------------------------ one turn
    def act(self, observation: str) -> str:
        view = read_view(observation)
        if view is None:
            return self._do("check available actions", "I cannot read the observation, so I ask for the actions.")
        if view.event is None or view.mission != self.memory.mission:  # a new episode
            self.memory = GridMemory(mission=view.mission, steps=parse_mission(view.mission))
        else:
            self._follow(view)
        m = self.memory
        if m.pending is not None:
            self._rejoin(view)
        m.frame.record(view)
        m.locked |= {t.colour for t in view.things if t.kind == "door" and t.state == "locked"}
        if (unlocked := _UNLOCKED.match(view.event or "")) is not None:
            m.locked.discard(unlocked.group(1))
        if m.steps and m.done >= len(m.steps):  # every step played but the mission goes on: the last target was wrong
            m.done = len(m.steps) - 1
            if m.target is not None:
                m.frame.wrong.add(m.target)
        if not view.carrying:
            m.putting_down, m.put_turns = False, 0
        if not m.sidestep and not m.putting_down and self.noisy():
            moves = [a for a in ("turn left", "turn right", "move forward") if a in view.actions]
            action, thought = self.rng.choice(moves), "I take a detour to look around."
        elif m.putting_down:
            action, thought = self._put_down(view)
        elif m.clearing is not None and not view.carrying and (cleared := self._clear(view)) is not None:
            action, thought = cleared
        elif not m.steps:
            action, thought = self._explore(view, None)
            thought = f"I do not understand the goal, so I explore: {thought}"
        else:
            action, thought = self._plan(view, m.steps[m.done])
        if not thought.startswith(SEEK_THOUGHT):
            m.seek_turns = 0
        m.last, m.last_view = action, view
        return self._do(action, thought)

    def _follow(self, view: View) -> None:
        """Count a finished step and move the frame by the last action's outcome."""
        m, event, last, prev, frame = (
            self.memory,
            view.event or "",
            self.memory.last,
            self.memory.last_view,
            self.memory.frame,
        )
        refused = event.startswith(("You cannot", "Invalid action", "You can take"))
        if m.finishing is not None and not refused and event.startswith(m.finishing):
            m.done += 1
        m.finishing = None
        if refused or prev is None:
            return
        if last in ("turn left", "turn right", "move forward"):
            frame.pose = _moved(frame.pose, last)
        elif last == "drop" and prev.carrying:
            frame.things[_place(frame.pose, 1, 0)] = (*prev.carrying, None)
        elif last == "toggle":
            frame.things.pop(_place(frame.pose, 1, 0), None)  # a box turns into what it held; a door is seen again
        elif last.startswith(("go through", "toggle and go through")):
            colour = last.split()[-3]
            m.doors_used[colour] = m.doors_used.get(colour, 0) + 1
            self._new_frame(came_from=(0, 0) if "stepped into" in event else (-1, 0))
        elif last.startswith(("go to", "pickup")):
            label = " ".join(last.split()[-3:])
            target = next((t for t in prev.things if t.label == label), None)
            if target is None:
                return
            cell = frame.where(target)
            if last.startswith("pickup"):
                frame.things.pop(cell, None)
            if (target.front, target.right) == (1, 0):
                return
            poses = [((cell[0] - h[0], cell[1] - h[1]), h) for h in HEADINGS]
            pose = self._relocate(view, poses)
            if pose is None:
                old = m.frame
                self._new_frame()
                m.pending = (old, poses)
            else:
                frame.pose, m.scans, m.forwards = pose, 0, 0

    def _new_frame(self, came_from: Vec | None = None) -> None:
        self.memory.frame, self.memory.pending = Frame(is_start=False, came_from=came_from), None
        self.memory.scans = self.memory.forwards = self.memory.clearings = 0

    def _rejoin(self, view: View) -> None:
        """Return to the sketch lost by the last long move once the view tells which of its poses is the one."""
        m = self.memory
        old, origins = m.pending  # type: ignore[misc]
        pose = self._relocate(view, [_compose(origin, m.frame.pose) for origin in origins], old)
        if pose is None:
            return
        origin = origins[[_compose(o, m.frame.pose) for o in origins].index(pose)]
        for cell, known in m.frame.things.items():
            old.things[_place(origin, *cell)] = known
        old.pose, m.frame, m.pending = pose, old, None

    def _relocate(self, view: View, poses: list[Pose], frame: Frame | None = None) -> Pose | None:
        """The one pose among ``poses`` from which the view best fits ``frame``'s things (by default the sketch's);
        None if unclear."""
        frame = frame or self.memory.frame
        scored = []
        for pose in poses:
            score = 0
            for thing in view.things:
                known = frame.things.get(_place(pose, thing.front, thing.right))
                if known is not None:
                    score += 1 if known[:2] == (thing.colour, thing.kind) else -1
            scored.append((score, pose))
        scored.sort(key=lambda entry: -entry[0])
        if scored[0][0] >= 1 and (len(scored) == 1 or scored[0][0] > scored[1][0]):
            return scored[0][1]
        return None

    # ------------------------------------------------------------------ targets
    def _fits(self, desc: Desc, cell: Vec, colour: str, kind: str) -> bool:
        """Whether the thing at ``cell`` fits ``desc``, its location too when the frame is the start's."""
        if not desc.matches(colour, kind) or not self.memory.frame.usable(cell):
            return False
        if desc.loc is None or not self.memory.frame.is_start:
            return True
        a, b = cell
        return {"front": a > 0, "behind": a < 0, "left": b < 0, "right": b > 0}[desc.loc]

    def _pursue(self, view: View, desc: Desc, use: Callable[[Seen], Action | None]) -> Action | None:
        """``use`` a thing fitting ``desc``: one in view (clearing what blocks it), else turn towards one remembered."""
        frame = self.memory.frame
        in_view = [t for t in view.things if self._fits(desc, frame.where(t), t.colour, t.kind)]
        for thing in in_view:
            if (done := use(thing)) is not None:
                return done
        for thing in in_view:
            if (cleared := self._unblock(view, frame.where(thing), thing.kind == "door")) is not None:
                return cleared
            frame.give_up(frame.where(thing))
        remembered = [
            cell
            for cell, (colour, kind, _) in frame.things.items()
            if self._fits(desc, cell, colour, kind) and cell not in {frame.where(t) for t in in_view}
        ]
        position = frame.pose[0]
        for cell in sorted(remembered, key=lambda c: abs(c[0] - position[0]) + abs(c[1] - position[1])):
            if (turn := self._turn_towards(cell)) is not None:
                return turn
        return None

    def _turn_towards(self, cell: Vec) -> Action | None:
        """Turn to bring the remembered ``cell`` into view; None (and the cell given up) when that cannot work."""
        m = self.memory
        front, right = _offset(m.frame.pose, cell)
        if m.seek_turns >= 3 or (0 < front <= 6 and abs(right) <= 3):  # in the view cone but not seen
            m.frame.give_up(cell)
            m.seek_turns = 0
            return None
        m.seek_turns += 1
        action = "turn right" if right > 0 else "turn left"
        return action, f"{SEEK_THOUGHT}, so I turn towards it."

    def _unblock(self, view: View, cell: Vec, door: bool) -> Action | None:
        """Pick up a thing that bars the way (right in front, or next to the ``door`` at ``cell``) to put it aside."""
        m = self.memory
        if m.clearings >= MAX_CLEARINGS:
            return None
        for thing in view.things:
            near = m.frame.where(thing)
            in_the_way = (thing.front, thing.right) == (1, 0) and "move forward" not in view.actions
            if thing.kind != "door" and (door and abs(near[0] - cell[0]) + abs(near[1] - cell[1]) == 1 or in_the_way):
                m.clearings, m.cleared_for = m.clearings + 1, cell if door else None
                if view.carrying:
                    m.clearing = near
                    return self._free_hands(view, f"to move {thing.label} out of the way")
                if f"pickup {thing.label}" in view.actions:
                    m.putting_down = True
                    return f"pickup {thing.label}", f"{thing.label} bars the way, so I pick it up to move it."
        return None

    def _clear(self, view: View) -> Action | None:
        """Pick up the obstacle at ``clearing`` (to put it aside), or give it up (None)."""
        m = self.memory
        cell, m.clearing = m.clearing, None
        thing = next((t for t in view.things if m.frame.where(t) == cell), None)
        if thing is None or f"pickup {thing.label}" not in view.actions:
            return None
        m.putting_down = True
        return f"pickup {thing.label}", f"{thing.label} bars the way, so I pick it up to move it."

    def _put_down(self, view: View) -> Action:
        """Drop on a free cell other than the one just picked from: turn, and after a full turn move on."""
        m = self.memory
        ahead, door = _place(m.frame.pose, 1, 0), m.cleared_for
        beside_door = door is not None and abs(ahead[0] - door[0]) + abs(ahead[1] - door[1]) <= 1
        if "drop" in view.actions and not m.last.startswith("pickup") and m.put_turns % 4 and not beside_door:
            m.putting_down, m.put_turns = False, 0
            return "drop", "I put down what I carry here, out of the way."
        if m.put_turns >= 4 and "move forward" in view.actions:
            m.put_turns = 1  # what was picked up is no longer in front
            return "move forward", "There is no free cell around me; I move on to put down what I carry."
        m.put_turns += 1
        return "turn left", "I turn to find a free cell to put down what I carry."

    def _take(self, view: View, t: Seen, thought: str) -> Action | None:
        """Pick up ``t`` (``thought`` says why) once the hands are free; None when the actions do not offer it."""
        if view.carrying:
            return self._free_hands(view, f"to pick up {t.label}")
        if f"pickup {t.label}" in view.actions:
            return f"pickup {t.label}", thought
        return None

    def _free_hands(self, view: View, why: str) -> Action:
        carried = " ".join(view.carrying or ())
        if "drop" in view.actions:
            return "drop", f"I drop the {carried} {why}."
        self.memory.putting_down = True
        return "turn left", f"I turn to find a free cell where I can drop the {carried} {why}."

    def _finish(self, thing: Seen, prefix: str) -> None:
        self.memory.finishing, self.memory.target = prefix, self.memory.frame.where(thing)

    # ------------------------------------------------------------------ steps
    def _plan(self, view: View, step: Step) -> Action:
        if step.verb == "put":
            return self._put(view, step)
        what = step.desc.words()

        def go_to(t: Seen) -> Action | None:
            if f"go to {t.label}" not in view.actions:
                return None
            self._finish(t, "You ")
            return f"go to {t.label}", f"I see the {what} I must reach: {t.label}; I go to it."

        def pick_up(t: Seen) -> Action | None:
            if t.kind == "door":
                return None
            if view.carrying:
                return self._free_hands(view, f"to pick up {t.label}")
            if f"pickup {t.label}" not in view.actions:
                return None
            self._finish(t, "You picked up")
            return f"pickup {t.label}", f"I pick up {t.label}, the {what} of my goal."

        def open_door(t: Seen) -> Action | None:
            if t.kind != "door":
                return None
            if (t.front, t.right) == (1, 0) and "toggle" in view.actions:
                if t.state != "open":
                    self._finish(t, "You opened" if t.state == "closed" else "You unlocked")
                return "toggle", f"{t.label} is in front of me, so I toggle it open."
            if t.state == "locked" and view.carrying != (t.colour, "key"):
                return self._get_key(view, t.colour)
            if f"go to {t.label}" in view.actions:
                return f"go to {t.label}", f"I walk up to {t.label} to open it."
            return None

        if step.verb == "open" and (key := self._key_needed(view, step.desc)) is not None:
            return self._get_key(view, key) or self._explore(view, step)
        use = {"go to": go_to, "pick up": pick_up, "open": open_door}[step.verb]
        return self._pursue(view, step.desc, use) or self._explore(view, step)

    def _key_needed(self, view: View, desc: Desc) -> str | None:
        """The colour of key to fetch first: every door known to fit ``desc`` is locked and the key is not carried."""
        frame = self.memory.frame
        doors = [
            (c, s) for cell, (c, kind, s) in frame.things.items() if kind == "door" and self._fits(desc, cell, c, kind)
        ]
        if not doors or any(s != "locked" for _, s in doors) or any(view.carrying == (c, "key") for c, _ in doors):
            return None
        return doors[0][0]

    def _get_key(self, view: View, colour: str) -> Action | None:
        """Fetch a key of ``colour`` in view or remembered; None when none is known."""

        def take(t: Seen) -> Action | None:
            return self._take(view, t, f"A {colour} door is locked, so I pick up {t.label}.")

        return self._pursue(view, Desc(colour, "key", None), take)

    def _put(self, view: View, step: Step) -> Action:
        m = self.memory
        fixed = step.fixed or step.desc
        if view.carrying is None or not step.desc.matches(*view.carrying):
            m.sidestep, m.sidestep_tries = [], 0

            def take(t: Seen) -> Action | None:
                return self._take(view, t, f"I pick up {t.label} to put it next to the {fixed.words()}.")

            return self._pursue(view, step.desc, take) or self._explore(view, step)
        anchors = [t for t in view.things if self._fits(fixed, m.frame.where(t), t.colour, t.kind)]
        for anchor in anchors:
            if "drop" in view.actions and (anchor.front, anchor.right) in NEXT_TO_FIXED:
                m.sidestep = []
                self._finish(anchor, "You dropped")
                return "drop", f"The cell in front of me is next to {anchor.label}, so I drop the object here."
        if m.sidestep:
            if m.sidestep[0] in view.actions:
                return m.sidestep.pop(0), "I move so that the cell in front of me is next to it."
            m.sidestep = []  # this way is blocked: face the object again and try the next way

        def approach(t: Seen) -> Action | None:
            if (t.front, t.right) == (1, 0) and m.sidestep_tries < len(SIDESTEPS):
                first, *rest = SIDESTEPS[m.sidestep_tries]
                m.sidestep, m.sidestep_tries = rest, m.sidestep_tries + 1
                return first, f"I face {t.label}; I move to drop the object next to it."
            if (t.front, t.right) != (1, 0) and f"go to {t.label}" in view.actions:
                return f"go to {t.label}", f"I carry the object; I walk up to {t.label}."
            return None

        return self._pursue(view, fixed, approach) or self._explore(view, step)

    # ------------------------------------------------------------------ exploring
    def _explore(self, view: View, step: Step | None) -> Action:
        m, frame = self.memory, self.memory.frame
        wanted = step.desc.words() if step else "something useful"
        needs_key = bool(m.locked) and view.carrying is None
        box = next((t for t in view.things if t.kind == "box" and (t.front, t.right) == (1, 0)), None)
        if needs_key and box is not None and "toggle" in view.actions and m.last == f"go to {box.label}":
            return "toggle", f"I need a key for a locked door; I open {box.label} to look inside."
        if m.scans < SCAN_TURNS:
            m.scans += 1
            return "turn left", f"I do not see the {wanted}, so I turn to look around."
        frame.scanned.add(frame.pose[0])
        busy = step is not None and step.verb == "put" and view.carrying is not None
        key = view.carrying[0] if view.carrying and view.carrying[1] == "key" else None

        def through(t: Seen) -> Action | None:
            if t.state == "open" and f"go through {t.label}" in view.actions:
                return f"go through {t.label}", f"I do not see the {wanted} here, so I go through {t.label}."
            if t.state != "open" and f"toggle and go through {t.label}" in view.actions:
                return f"toggle and go through {t.label}", f"I open {t.label} and go through to look for the {wanted}."
            return None

        if key in m.locked:
            found = self._pursue(view, Desc(key, "door", None), lambda t: through(t) if t.state == "locked" else None)
            if found:
                return found
        if not busy and key not in m.locked:
            for colour in sorted(m.locked):
                if (found := self._get_key(view, colour)) is not None:
                    return found
        for state in ("closed", "open"):
            doors = sorted(
                ((cell, c) for cell, (c, kind, s) in frame.things.items() if kind == "door" and s == state),
                key=lambda entry: m.doors_used.get(entry[1], 0),
            )
            for cell, _colour in doors:
                if cell != frame.came_from and (found := self._pursue_cell(view, cell, through)) is not None:
                    return found
        if needs_key:

            def open_box(t: Seen) -> Action | None:
                if (t.front, t.right) == (1, 0) and "toggle" in view.actions:
                    return "toggle", f"I need a key for a locked door; I open {t.label} to look inside."
                if f"go to {t.label}" in view.actions:
                    return f"go to {t.label}", f"I need a key for a locked door; {t.label} may hold one."
                return None

            if (found := self._pursue(view, Desc(None, "box", None), open_box)) is not None:
                return found
        back = frame.came_from
        if back is not None and len(frame.scanned) >= 2 and (found := self._pursue_cell(view, back, through)):
            return found  # this side looked at from two spots: go back the way it came
        return self._walk(view, wanted)

    def _pursue_cell(self, view: View, cell: Vec, use: Callable[[Seen], Action | None]) -> Action | None:
        frame = self.memory.frame
        if not frame.usable(cell):
            return None
        thing = next((t for t in view.things if frame.where(t) == cell), None)
        if thing is None:
            return self._turn_towards(cell)
        if (done := use(thing)) is not None:
            return done
        frame.give_up(cell)
        return None

    def _walk(self, view: View, wanted: str) -> Action:
        """Walk towards the least explored side: the heading whose cell 3 steps on is farthest from where it looked."""
        m, frame = self.memory, self.memory.frame
        position, heading = frame.pose
        if "move forward" not in view.actions:
            frame.blocked.add(frame.pose)
        options = []
        for order, (turn, h) in enumerate(
            (
                ("move forward", heading),
                ("turn left", _left(heading)),
                ("turn right", _right(heading)),
                ("turn left", (-heading[0], -heading[1])),
            )
        ):
            if (position, h) in frame.blocked:
                continue
            ahead = (position[0] + 3 * h[0], position[1] + 3 * h[1])
            novelty = min((abs(ahead[0] - s[0]) + abs(ahead[1] - s[1]) for s in frame.scanned), default=99)
            options.append((-novelty, order, turn))
        if not options:
            ahead = next((t for t in view.things if (t.front, t.right) == (1, 0) and t.kind != "door"), None)
            if ahead is not None and not view.carrying and f"pickup {ahead.label}" in view.actions:
                m.putting_down = True
                return f"pickup {ahead.label}", f"I am boxed in; I pick up {ahead.label} to clear the way."
            return "turn left", f"I am boxed in; I turn to look for the {wanted}."
        _, _, action = min(options)
        if action == "move forward":
            m.forwards += 1
            if m.forwards >= MAX_FORWARD:
                m.scans, m.forwards = 0, 0
            return action, f"I do not see the {wanted}, so I walk on to unexplored ground."
        return action, f"I turn towards unexplored ground to look for the {wanted}."
