"""One ALFWorld game played on the real engine: TextWorld's PDDL engine with ALFWorld's domain, grammar and names.

* `Engine` is the engine as ALFWorld runs its text games: ``textworld``'s
  ``PddlEnv`` (Fast Downward underneath, one private copy of its library per
  engine) wrapped in ALFWorld's ``AlfredDemangler`` (objects are called
  ``mug 1``, ``countertop 2``).  Loading a game translates its PDDL (about a
  second).  Engine calls run one at a time in a process: the translator keeps
  global state, and the engines' library copies share some, so concurrent
  steps on two engines fail inside the library.  A step (milliseconds) waiting
  for the engines goes before every waiting reset (a load: about a second), so
  32 episodes started together do not hold the first ones' steps behind the
  others' loads (`StepsFirstLock`).  `Engine.close` puts the
  engine back in a pool of idle engines that the next `Engine()` in the
  process reuses: a library copy, once loaded,
  is never unloaded, because the copies share Fast Downward's plugin registry,
  and unloading one leaves that registry pointing into freed code (the process
  then crashes when it exits).  The pool holds at most as many engines as were
  ever open at once.
* ``AlfWorldEnv.reset(game)`` loads game ``game`` (a generated task id, or the
  index of a real game when the server has a `data.GameFolder`) and answers the
  first observation: ALFWorld's room description and ``Your task is to: ...``
  (TextWorld's welcome banner removed), then a line ``AVAILABLE ACTIONS: `` with
  the engine's admissible commands, joined by ``, ``.  Every observation ends
  with that line.
* ``step(action)``: the action (case, surrounding spaces and a trailing full
  stop ignored; ``put X in/on Y``, ``put X in Y`` and ``put X on Y`` are read as
  the engine's ``move X to Y``) must be one of the available actions; the
  engine's answer is the observation (``You arrive at countertop 1. On the
  countertop 1, you see a mug 1.``).  Any other text changes nothing and says
  ``Nothing happens: "<action>" is not one of the available actions.``  Every
  action uses one of ``max_steps`` (default 50) turns.  Reward 1.0 and done when
  the task's goal holds; done with 0.0 after the last turn (the observation
  then adds ``You have used all <max_steps> actions.``).  Stepping a finished
  episode, or before any reset, is `EpisodeStateError`.
"""

from __future__ import annotations

import re
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..game import StepResult, require_episode, task_of
from .data import Game, generated_game

DEFAULT_MAX_STEPS = 50
BANNER = "-= Welcome to TextWorld, ALFRED! =-"
ACTIONS_PREFIX = "AVAILABLE ACTIONS: "
_PUT = re.compile(r"^put (.+?) (?:in/on|in|on) (.+)$")


class StepsFirstLock:
    """A mutex whose waiting steps go before waiting resets.

    ``hold(step=True)`` waits while the lock is held; ``hold(step=False)`` also waits while any step waits.
    Steps take milliseconds and come one per episode per model turn, so resets still run in the gaps; without the
    order, a step queued behind 30 resets waits 30 loads (past the agent's request timeout on a busy 2-core box).
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._waiting = {"step": 0, "reset": 0}

    @contextmanager
    def hold(self, step: bool) -> Iterator[None]:
        kind = "step" if step else "reset"
        with self._changed:
            self._waiting[kind] += 1
            try:
                while self._held or (not step and self._waiting["step"]):
                    self._changed.wait()
            finally:
                self._waiting[kind] -= 1
            self._held = True
        try:
            yield
        finally:
            with self._changed:
                self._held = False
                self._changed.notify_all()


# Fast Downward's translator keeps global options (and rewrites sys.argv), and the engines' library copies share
# global state: a step on one engine while another engine steps or loads fails (IndexError, TypeError) in the
# library, so every engine call in a process holds this lock (steps take milliseconds; a load about a second)
_ENGINE_LOCK = StepsFirstLock()
_POOL_LOCK = threading.Lock()
_IDLE_ENGINES: list[tuple[Any, Any, "Game | None"]] = []  # (PddlEnv, AlfredDemangler, loaded game) of closed engines


class Engine:
    """ALFWorld's text engine for one game at a time (see the module docstring)."""

    def __init__(self) -> None:
        with _POOL_LOCK:
            idle = _IDLE_ENGINES.pop() if _IDLE_ENGINES else None
        self.pddl, self.game, self.loaded = idle if idle is not None else self._new_engine()

    @staticmethod
    def _new_engine() -> tuple[Any, Any, Game | None]:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
        from textworld.envs.pddl import PddlEnv

        pddl = PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True))
        return pddl, AlfredDemangler(pddl, shuffle=False), None

    def reset(self, game: Game, plan: bool = False) -> Any:
        """Load ``game`` (unless it is the one loaded) and start it; the engine's first state.

        ``plan``: the state also holds Fast Downward's plan from the start (``state["policy_commands"]``).
        """
        argv = list(sys.argv)
        with _ENGINE_LOCK.hold(step=False):
            self.pddl.request_infos.policy_commands = plan
            try:
                if self.loaded != game:
                    self.loaded = None
                    self.game.load(game.source)
                    self.loaded = game
                return self.game.reset()
            finally:
                self.pddl.request_infos.policy_commands = False
                sys.argv[:] = argv

    def step(self, command: str) -> tuple[Any, float, bool]:
        with _ENGINE_LOCK.hold(step=True):
            return self.game.step(command)

    def close(self) -> None:
        """Give the engine back to the pool (see the module docstring); a closed engine is not used again."""
        if self.pddl is None:
            return
        with _POOL_LOCK:
            _IDLE_ENGINES.append((self.pddl, self.game, self.loaded))
        self.pddl = self.game = self.loaded = None  # type: ignore[assignment]


def with_actions(text: str, actions: list[str]) -> str:
    """``text`` and the line listing ``actions`` (the format of every observation)."""
    return f"{text}\n{ACTIONS_PREFIX}{', '.join(actions)}"


def normalize(action: str, available: list[str]) -> str:
    """``action`` as the engine's command: lower case, single spaces, no final full stop; ``put`` read as ``move``."""
    text = " ".join(action.lower().split()).removesuffix(".").strip()
    put = _PUT.match(text)
    if put and text not in available:
        return f"move {put.group(1)} to {put.group(2)}"
    return text


class AlfWorldEnv:
    """One player's game (see the module docstring); ``games`` maps a game id to a `data.Game`."""

    def __init__(self, games: Callable[[int], Game] = generated_game, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.games = games
        self.max_steps = max_steps
        self.engine: Engine | None = None
        self.game: Game | None = None
        self.observation = ""
        self.available_actions: list[str] = []
        self.plan: list[str] = []
        self.done = False
        self.won = False
        self.steps = 0

    def reset(self, game_id: int, plan: bool = False) -> dict[str, Any]:
        """Start game ``game_id``: ``{"observation", "available_actions", "task_type", "reward", "done"}``.

        ``plan``: also keep the planner's plan from the start in ``self.plan`` (the oracle's, see `plan.oracle`).
        """
        game = task_of(self.games, game_id)
        if self.engine is None:
            self.engine = Engine()
        state = self.engine.reset(game, plan)
        self.plan = [str(command) for command in state["policy_commands"]] if plan else []
        self.game, self.done, self.won, self.steps = game, False, False, 0
        text = state.feedback.replace(BANNER, "").strip()
        self._observe(text, state)
        return {
            "observation": self.observation,
            "available_actions": list(self.available_actions),
            "task_type": game.task_type,
            "reward": 0.0,
            "done": False,
        }

    def step(self, action: str) -> StepResult:
        require_episode(self.engine is not None and self.game is not None, self.done)
        self.steps += 1
        command, reward = normalize(action, self.available_actions), 0.0
        if command in self.available_actions:
            state, _, _ = self.engine.step(command)
            self.won = bool(state["won"])
            reward, self.done = (1.0, True) if self.won else (0.0, False)
            text = state.feedback.strip()
        else:
            state = None
            text = f'Nothing happens: "{" ".join(action.split())}" is not one of the available actions.'
        if not self.done and self.steps >= self.max_steps:
            self.done = True
            text += f" You have used all {self.max_steps} actions."
        self._observe(text, state)
        return StepResult(self.observation, reward, self.done, {"available_actions": list(self.available_actions)})

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def _observe(self, text: str, state: Any) -> None:
        if state is not None:
            self.available_actions = list(state["admissible_commands"])
        self.observation = with_actions(text, self.available_actions)
