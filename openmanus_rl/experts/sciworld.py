"""A SciWorld player that finds the task it is shown in its own simulator and plays the simulator's gold path.

ScienceWorld's gold paths come from the simulator's state, which the agent
never sees, so `SciWorldExpert` first works out which (task, variation) it is
playing from the first observation alone: the task description and the first
``look around`` (`agentgym.sciworld.app` answers them joined by a blank line).
It keeps an index of every variation's task description (`description_index`:
each description's SHA-256 prefix -> its variations; the one for the ScienceWorld
version pinned here ships beside this module, `sciworld_descriptions.json`; for
any other version it is built once with its own JVM, about 3 minutes, and cached
on disk: `python -m openmanus_rl.experts.sciworld` rewrites the shipped one), loads each
variation with that description in its own simulator and keeps, of those
whose ``look around`` has every word it was shown as often, the one with the
fewest words besides (the simulator lists a room's objects in no fixed order;
the last line shown may be cut short, so it is left out).  Then it plays that
variation's gold path, one action a turn.  When nothing matches, or the path
is used up, it answers ``look around`` (`FALLBACK`; it changes nothing).
Some variations start exactly alike (the same task description and first
room, e.g. where the living thing to find is hidden elsewhere); the expert
then plays the first one's gold path, which can fail.

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

from agentgym.cache import cache_root
from agentgym.sciworld.data import NUM_TASKS, task
from agentgym.sciworld.env import SciWorldEnv

from .registry import Expert

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


class SciWorldExpert(Expert):
    """Recognises the variation it is shown and plays its gold path (see the module docstring)."""

    env_name = "sciworld"

    def __init__(self, noise: float = 0.0, seed: int = 0, simplifications: str = "") -> None:
        super().__init__(noise, seed)
        self.simplifications = simplifications
        self._sim: SciWorldEnv | None = None
        self.plan: list[str] | None = None

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.plan = None  # the gold path still to play; None until the first observation is read
        self.data_idx: int | None = None

    def identify(self, observation: str) -> int | None:
        """The ``data_idx`` whose task description and first look around ``observation`` shows, or None."""
        description, _, look = observation.partition("\n\n")
        candidates = description_index().get(description_key(description), [])
        if len(candidates) == 1:
            return candidates[0]
        shown = Counter(" ".join(look.strip().splitlines()[:-1]).split())  # the last line may be cut short
        if not shown:
            return None
        fits: list[tuple[int, int]] = []  # (words not shown, data_idx) of the candidates with every word shown
        for data_idx in candidates:
            words = Counter(self._simulator().reset(data_idx)["observation"].split())
            if not shown - words:
                fits.append((sum((words - shown).values()), data_idx))
        return min(fits)[1] if fits else None

    def act(self, observation: str) -> str:
        if self.plan is None:
            self.data_idx = self.identify(observation)
            if self.data_idx is None:
                self.plan = []
            else:
                sim = self._simulator()
                sim.reset(self.data_idx, gold_path=True)
                self.plan = sim.gold_path()
        if not self.plan:
            return self._do(FALLBACK, "I do not know what to do next, so I look around.")
        if self.noisy():
            return self._do(FALLBACK, "I look around once more before my next step.")
        action = self.plan.pop(0)
        t = task(self.data_idx) if self.data_idx is not None else None
        goal = f"the {t.title.lower()} task" if t else "the task"
        return self._do(action, f"For {goal} my next step is to {action}; {len(self.plan)} steps remain in my plan.")

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
