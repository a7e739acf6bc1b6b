"""A scripted ALFWorld player that reads only the observations the agent gets.

`AlfWorldExpert` never sees the server's game.  From the first observation it
reads the receptacles of the room (``you see a cabinet 1, ..., and a toaster 1``)
and the task (``Your task is to: put a clean mug in coffeemachine.``; the six
task types by ALFWorld's sentence templates); from every observation the
engine's answer and the ``AVAILABLE ACTIONS:`` line.  It remembers what it has
seen where (``On the countertop 1, you see a mug 1, ...``, ``In it, you see ...``)
and plays a search:

* hands empty: take a wanted object where it stands (``take mug 1 from
  countertop 1``); else go to where one was seen; else open the closed
  receptacle it stands at; else go to the next receptacle not visited yet
  (first those that ALFRED's tables say can hold the object, the goal's
  receptacle type last; open surfaces before closed receptacles);
* holding the object: clean / heat / cool it first when the task says so
  (``go to sinkbasin 1``, ``clean mug 1 with sinkbasin 1``; microwave; fridge),
  then go to a receptacle of the goal's type, open it if closed, and
  ``move mug 1 to coffeemachine 1``; for a lamp task, go to the lamp (searching
  for it if not seen yet) and ``use desklamp 1``; for two objects, do it twice.

An action it would play that is not in the available actions is replaced by
``look``.  ``noise`` in [0, 1]: with that probability (seeded by ``seed``) it
goes to a random receptacle instead (a detour); ``noise=0`` is deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..expert import Expert

ACTIONS_PREFIX = "AVAILABLE ACTIONS: "
FALLBACK = "look"
APPLIANCES = {"clean": ("sinkbasin", "clean"), "heat": ("microwave", "heat"), "cool": ("fridge", "cool")}
# ALFWorld's task sentences (alfworld.gen.goal_library), most specific first: (pattern, kind)
TASKS = [
    (r"put a clean (\w+) in (\w+)", "clean"),
    (r"clean some (\w+) and put it in (\w+)", "clean"),
    (r"put a hot (\w+) in (\w+)", "heat"),
    (r"heat some (\w+) and put it in (\w+)", "heat"),
    (r"put a cool (\w+) in (\w+)", "cool"),
    (r"cool some (\w+) and put it in (\w+)", "cool"),
    (r"put two (\w+) in (\w+)", "two"),
    (r"find two (\w+) and put them in (\w+)", "two"),
    (r"look at (\w+) under the (\w+)", "look"),
    (r"examine the (\w+) with the (\w+)", "look"),
    (r"put a (\w+) in (\w+)", "place"),
    (r"put some (\w+) on (\w+)", "place"),
]
_ROOM = re.compile(r"Looking quickly around you, you see (.+?)\.(?:\n|$)")
_TASK = re.compile(r"Your task is to: (.+?)\.?(?:\n|$)")
_SEEN = re.compile(r"(?:On the ([\w ]+? \d+), you see|The ([\w ]+? \d+) is open\. In it, you see) (.+?)\.(?:\s|$)")
_DONE = {
    "take": re.compile(r"You pick up the ([\w ]+? \d+) from the ([\w ]+? \d+)\."),
    "move": re.compile(r"You move the ([\w ]+? \d+) to the ([\w ]+? \d+)\."),
    "treat": re.compile(r"You (?:clean|heat|cool) the ([\w ]+? \d+) using the"),
    "arrive": re.compile(r"You arrive at ([\w ]+? \d+)\."),
    "open": re.compile(r"You open the ([\w ]+? \d+)\."),
}


def kind_of(name: str) -> str:
    """``"mug 1"`` -> ``"mug"``."""
    return name.rsplit(" ", 1)[0]


def split_list(text: str) -> list[str]:
    """``"a mug 1, a cup 2, and a fork 1"`` -> ``["mug 1", "cup 2", "fork 1"]``; ``"nothing"`` -> []."""
    items = re.split(r", and |, | and ", text)
    return [re.sub(r"^(?:a|an) ", "", item.strip()) for item in items if item.strip() and item.strip() != "nothing"]


def available_actions(observation: str) -> list[str]:
    """The actions of the observation's last ``AVAILABLE ACTIONS:`` line ([] when there is none)."""
    lines = [line for line in observation.splitlines() if line.startswith(ACTIONS_PREFIX)]
    return [a for a in lines[-1][len(ACTIONS_PREFIX) :].split(", ") if a] if lines else []


def read_task(sentence: str) -> tuple[str, str, str] | None:
    """``"put a clean mug in coffeemachine"`` -> ``("clean", "mug", "coffeemachine")``; None if unknown."""
    for pattern, kind in TASKS:
        match = re.fullmatch(pattern, sentence.strip().lower())
        if match:
            return kind, match.group(1), match.group(2)
    return None


@dataclass
class HouseholdMemory:
    """What the expert knows of the current episode."""

    kind: str = ""
    target: str = ""
    goal: str = ""  # the goal receptacle type, or the lamp type of a lamp task
    receptacles: list[str] = field(default_factory=list)
    at: str = ""
    holding: str = ""
    seen: dict[str, str] = field(default_factory=dict)  # object -> receptacle where it was last seen
    visited: set[str] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    treated: set[str] = field(default_factory=set)
    placed: set[str] = field(default_factory=set)


class AlfWorldExpert(Expert):
    """Finds, treats and places objects from what the observations say (see the module docstring)."""

    env_name = "alfworld"

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.memory = HouseholdMemory()

    def act(self, observation: str) -> str:
        actions = available_actions(observation)
        self._read(observation)
        m = self.memory
        if not m.kind:
            return self._do(FALLBACK, "I do not know the task yet, so I look around.")
        if self.noisy():
            detours = [a for a in actions if a.startswith("go to ")]
            if detours:
                action = self.rng.choice(detours)
                return self._do(action, f"I take a detour: {action}.")
        action, thought = self._decide()
        if actions and action not in actions:
            return self._do(FALLBACK, f"I wanted to {action}, but I cannot now, so I look around.")
        if action.startswith("go to "):
            m.at = action[len("go to ") :]
        return self._do(action, thought)

    # ------------------------------------------------------------------ reading
    def _read(self, observation: str) -> None:
        m = self.memory
        room, task = _ROOM.search(observation), _TASK.search(observation)
        if room and task and (parsed := read_task(task.group(1))):
            self.memory = m = HouseholdMemory(*parsed, receptacles=split_list(room.group(1)))
        for what, pattern in _DONE.items():
            for match in pattern.finditer(observation):
                name = match.group(1)
                if what == "arrive":
                    m.at = name
                    m.visited.add(name)
                elif what == "open":
                    m.at = name
                    m.opened.add(name)
                    m.visited.add(name)
                elif what == "take":
                    m.holding = name
                    m.seen.pop(name, None)
                elif what == "move":
                    m.holding = ""
                    m.placed.add(name)
                    m.seen[name] = match.group(2)
                else:
                    m.treated.add(name)
        for match in _SEEN.finditer(observation):
            where = match.group(1) or match.group(2)
            for name in split_list(match.group(3)):
                if name not in m.placed:
                    m.seen[name] = where

    # ------------------------------------------------------------------ deciding
    def _decide(self) -> tuple[str, str]:
        m = self.memory
        if m.holding:
            if m.kind in APPLIANCES and m.holding not in m.treated:
                appliance, verb = APPLIANCES[m.kind]
                return self._use_at(
                    appliance,
                    f"{verb} {m.holding} with {{r}}",
                    f"I hold the {m.holding}; I {verb} it with the {{r}} first.",
                )
            if m.kind == "look":
                lamp = next((o for o in m.seen if kind_of(o) == m.goal), None)
                if lamp is None:
                    return self._explore(f"I hold the {m.holding} and look for a {m.goal}.")
                if m.at != m.seen[lamp]:
                    return f"go to {m.seen[lamp]}", f"The {lamp} is at the {m.seen[lamp]}; I go there."
                return f"use {lamp}", f"I turn on the {lamp} to look at the {m.holding} under it."
            return self._use_at(m.goal, f"move {m.holding} to {{r}}", f"I put the {m.holding} in the {{r}}.")
        wanted = [o for o, r in m.seen.items() if kind_of(o) == m.target and o not in m.placed]
        here = [o for o in wanted if m.seen[o] == m.at]
        if here:
            return f"take {here[0]} from {m.at}", f"I take the {here[0]} I see here."
        if wanted:
            where = m.seen[wanted[0]]
            return f"go to {where}", f"I saw a {m.target} at the {where}; I go there."
        if m.at and self._openable(m.at) and m.at not in m.opened:
            return f"open {m.at}", f"I open the {m.at} to look inside for a {m.target}."
        return self._explore(f"I look for a {m.target}.")

    def _use_at(self, kind: str, command: str, thought: str) -> tuple[str, str]:
        """Go to a receptacle of type ``kind`` (the one we are at, else the first listed), open it if it is closed
        and ``command`` puts something in it (cleaning, heating and cooling need no opening), then play ``command``."""
        m = self.memory
        places = [r for r in m.receptacles if kind_of(r) == kind]
        if not places:
            return FALLBACK, f"I see no {kind} in this room."
        place = m.at if m.at in places else places[0]
        if m.at != place:
            return f"go to {place}", f"I go to the {place}."
        if command.startswith("move ") and self._openable(place) and place not in m.opened:
            return f"open {place}", f"The {place} is closed; I open it."
        return command.format(r=place), thought.format(r=place)

    def _explore(self, why: str) -> tuple[str, str]:
        m = self.memory
        order = sorted((r for r in m.receptacles if r not in m.visited), key=self._priority)
        if not order:
            return FALLBACK, "I have been everywhere; I look around."
        return f"go to {order[0]}", f"{why} I have not checked the {order[0]} yet."

    def _priority(self, receptacle: str) -> tuple[int, bool]:
        """Where to search first: receptacles that can hold what is looked for, the goal's type last; open surfaces
        before closed receptacles (one action instead of two)."""
        m = self.memory
        wanted = m.goal if (m.kind == "look" and m.holding) else m.target
        kind = kind_of(receptacle)
        if kind == m.goal and m.kind != "look":
            rank = 2
        else:
            can_hold = wanted in _holders().get(kind, ()) or (kind in _LAMP_STANDS and wanted.endswith("lamp"))
            rank = 0 if can_hold else 1
        return rank, self._openable(receptacle)

    @staticmethod
    def _openable(receptacle: str) -> bool:
        return kind_of(receptacle) in ("cabinet", "drawer", "fridge", "microwave", "safe", "box")


_LAMP_STANDS = {"desk", "sidetable", "dresser", "shelf", "coffeetable", "tvstand", "armchair", "sofa"}
_HOLDERS: dict[str, set[str]] = {}


def _holders() -> dict[str, set[str]]:
    """ALFRED's table of which receptacle type can hold which object type, in lower case (common-sense knowledge)."""
    if not _HOLDERS:
        try:
            from alfworld.gen.constants import VAL_RECEPTACLE_OBJECTS
        except ImportError:  # without the engine's tables the search just goes in listed order
            return _HOLDERS
        _HOLDERS.update({r.lower(): {o.lower() for o in objs} for r, objs in VAL_RECEPTACLE_OBJECTS.items()})
    return _HOLDERS
