"""A SciWorld player that finds the task it is shown in its own simulator and plays the simulator's gold path.

ScienceWorld's gold paths come from the simulator's state, which the agent
never sees, so `SciWorldExpert` first works out which (task, variation) it is
playing from the first observation alone: the task description and the first
``look around`` (`agentgym.sciworld.app` answers them joined by a blank line).
It keeps an index of every variation's task description (`description_index`:
each description's SHA-256 prefix -> its variations; the one for the ScienceWorld
version pinned here ships beside this module, `sciworld_descriptions.json`; for
any other version it is built once with its own JVM, about 3 minutes, and cached
on disk: `python -m agentgym.sciworld.expert` rewrites the shipped one), loads each
variation with that description in its own simulator and keeps those whose
``look around`` has every word it was shown as often and the fewest words
besides (the simulator lists a room's objects in no fixed order; a last word
the agent's observation cut may have cut short is left out).  Then it plays
that variation's gold path, one action a turn.

Some variations start exactly alike (the same task description and first
room, e.g. where the animals to compare wait outside).  The expert then keeps
the gold paths of all of them and plays the action they share; where their
next actions part, it replays the episode's actions in its simulator for each
variation still in play, keeps those that showed every word the env showed
after every action, and plays the next action most of their gold paths agree
on, after one ``look around`` where the last observation did not tell them
apart (e.g. "You move to the outside.").  It can still pick the wrong
variation where even the room does not tell them apart.  When nothing matches, or every
path is used up, it answers ``look around`` (`FALLBACK`; it changes nothing).

``noise`` in [0, 1] makes a slower player: with that probability (seeded by
``seed``) it looks around instead of taking its next action, which costs a
turn and changes nothing.  ``noise=0`` is deterministic.  ``simplifications``
must be the server's.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

from ..cache import cache_root
from ..expert import TRUNCATION_MARKER, Expert
from ..open_envs import EpisodeStateError
from .data import NUM_TASKS, task
from .env import SciWorldEnv

FALLBACK = "look around"
SHIPPED_INDEX = Path(__file__).with_name("sciworld_descriptions.json")


def description_key(description: str) -> str:
    """The index's key for a task description: the first 16 hex digits of the SHA-256 of its stripped UTF-8 text."""
    return hashlib.sha256(description.strip().encode()).hexdigest()[:16]


def build_description_index() -> dict[str, list[int]]:
    """`description_key` -> the ``data_idx`` of every variation with that description, read from the simulator
    (one JVM, every variation loaded once: about 3 minutes)."""
    env = SciWorldEnv()
    index: dict[str, list[int]] = {}
    try:
        for data_idx in range(NUM_TASKS):
            t = task(data_idx)
            env.sim.load(t.name, t.variation, "")
            index.setdefault(description_key(str(env.sim.get_task_description())), []).append(data_idx)
    finally:
        env.close()
    return index


def _write(path: Path, index: dict[str, list[int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"scienceworld": version("scienceworld"), "index": index}, sort_keys=True) + "\n")
    partial.replace(path)


@lru_cache(maxsize=1)
def description_index() -> dict[str, list[int]]:
    """`build_description_index` for the installed ScienceWorld: the shipped file when its version matches, else
    the one cached under the cache root, else built now (and cached)."""
    installed = version("scienceworld")
    cached = cache_root() / "sciworld" / f"descriptions-{installed}.json"
    for path in (SHIPPED_INDEX, cached):
        if path.is_file() and (saved := json.loads(path.read_text())).get("scienceworld") == installed:
            return saved["index"]
    index = build_description_index()
    _write(cached, index)
    return index


def words_shown(observation: str) -> Counter[str]:
    """The words of an observation; where the agent's observation cut ended it (`TRUNCATION_MARKER`), the marker
    and the word before it (which may be cut short) are left out."""
    text = observation.rstrip()
    if not text.endswith(TRUNCATION_MARKER.strip()):
        return Counter(text.split())
    return Counter(text[: -len(TRUNCATION_MARKER.strip())].split()[:-1])


class SciWorldExpert(Expert):
    """Recognises the variation it is shown and plays its gold path (see the module docstring)."""

    env_name = "sciworld"

    def __init__(self, noise: float = 0.0, seed: int = 0, simplifications: str = "") -> None:
        super().__init__(noise, seed)
        self.simplifications = simplifications
        self._sim: SciWorldEnv | None = None
        self._first_looks: dict[int, Counter[str]] = {}  # data_idx -> the words of its first look around, once loaded

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.gold: dict[int, list[str]] | None = None  # data_idx -> gold path, of each variation the episode may be
        self.history: list[tuple[str, str]] = []  # (action sent, the observation the env answered), every turn
        self.played: list[str] = []  # the gold-path actions sent
        self._sent: str | None = None

    def candidates(self, observation: str) -> list[int]:
        """Every ``data_idx`` whose task description and first look around fit ``observation`` best (ascending):
        one where the first observation tells the variation, several where variations start alike, none where
        nothing fits."""
        description, _, look = observation.partition("\n\n")
        indexed = description_index().get(description_key(description), [])
        if len(indexed) <= 1:
            return list(indexed)
        shown = words_shown(look)
        if not shown:
            return []
        unshown: dict[int, int] = {}  # data_idx -> words it would show that were not shown, for every candidate
        for data_idx in indexed:  # with every shown word
            if data_idx not in self._first_looks:
                self._first_looks[data_idx] = Counter(self._simulator().reset(data_idx)["observation"].split())
            words = self._first_looks[data_idx]
            if not shown - words:
                unshown[data_idx] = sum((words - shown).values())
        fewest = min(unshown.values(), default=0)
        return sorted(data_idx for data_idx, extra in unshown.items() if extra == fewest)

    def act(self, observation: str) -> str:
        if self.gold is None:
            self.gold = self._gold_paths(self.candidates(observation))
        elif self._sent is not None:
            self.history.append((self._sent, observation))
        path = self._next_path()
        if path is None:
            self._sent = FALLBACK
            return self._do(FALLBACK, "I do not know what to do next, so I look around.")
        if self.noisy():
            self._sent = FALLBACK
            return self._do(FALLBACK, "I look around once more before my next step.")
        if self._paths_part() and self._sent not in (None, FALLBACK):
            self._sent = FALLBACK  # the variations still in play part here, and the last observation did not tell
            return self._do(
                FALLBACK,
                "More than one version of this task fits what I have seen, so I look around before my next step.",
            )
        action = self._sent = path[len(self.played)]
        self.played.append(action)
        goal = f"the {task(next(iter(self.gold))).title.lower()} task"
        return self._do(
            action, f"For {goal} my next step is to {action}; {len(path) - len(self.played)} steps remain in my plan."
        )

    def _gold_paths(self, ids: list[int]) -> dict[int, list[str]]:
        """``data_idx`` -> the gold path its simulator plans on loading it, for each of ``ids``."""
        sim = self._simulator()
        paths = {}
        for data_idx in ids:
            sim.reset(data_idx, gold_path=True)
            paths[data_idx] = sim.gold_path()
        return paths

    def _next_path(self) -> list[str] | None:
        """The gold path to take the next action from: of the variations whose gold path goes on from the actions
        played, the one whose next action most agree on (ties: the earliest variation's); where their next actions
        differ, only the variations `_consistent` with every observation vote. None when no gold path goes on."""
        assert self.gold is not None
        n = len(self.played)
        self.gold = {i: g for i, g in self.gold.items() if len(g) > n and g[:n] == self.played}
        if self._paths_part():
            self.gold = self._consistent(self.gold)
        if not self.gold:
            return None
        votes = Counter(g[n] for g in self.gold.values())
        return max(self.gold.values(), key=lambda g: votes[g[n]])

    def _paths_part(self) -> bool:
        """Whether the gold paths still in play (all going on from the actions played) differ in their next action."""
        return len({g[len(self.played)] for g in self.gold.values()}) > 1

    def _consistent(self, paths: dict[int, list[str]]) -> dict[int, list[str]]:
        """Those of ``paths``' variations whose simulator, sent every action the env was sent, shows every word the
        env showed after each (all of them where none does, so a simulator's quirk never leaves the expert without
        a plan)."""
        sim = self._simulator()

        def replays(data_idx: int) -> bool:
            sim.reset(data_idx)
            try:
                return all(
                    not words_shown(seen) - Counter(sim.step(action).observation.split())
                    for action, seen in self.history
                )
            except EpisodeStateError:  # the variation's episode ended where the env's did not
                return False

        return {i: g for i, g in paths.items() if replays(i)} or paths

    def _simulator(self) -> SciWorldEnv:
        if self._sim is None:
            self._sim = SciWorldEnv(self.simplifications)
        return self._sim

    def close(self) -> None:
        """Stop the expert's own simulator."""
        if self._sim is not None:
            self._sim.close()
            self._sim = None

    def __del__(self) -> None:
        self.close()


if __name__ == "__main__":  # rewrite the shipped index for the installed ScienceWorld
    _write(SHIPPED_INDEX, build_description_index())
    print(f"wrote {SHIPPED_INDEX}")
