"""The BabyAI game: a minigrid BabyAI level played with words and high-level actions.

* ``reset(task_id)`` generates the task's level (`data.task_level`; minigrid's
  "Sampling rejected" prints are swallowed) and answers::

      Your goal: go to the red ball
      There is a grey key 1 1 steps in front of you and 1 steps to your left.
      ...                                   (the view, see `agentgym.babyai.view`)
      You are not carrying anything.
      Available actions: ["turn left", "turn right", "move forward", "go to grey key 1", ...]

  A step's observation puts one line on what happened before these lines.
  The mission is minigrid's, word for word (``then`` and ``after you`` keep
  their order meaning).

* Actions (case, repeated spaces and a final full stop are ignored; ``pick up``
  reads as ``pickup``), each valid only when listed in ``Available actions``:

  ==================================  ====================================================================
  ``turn left``, ``turn right``        always
  ``move forward``                     the cell ahead is empty or an open door
  ``go to <colour> <type> <n>``        walk next to a thing in view and face it (a door too); when the
                                       agent already faces it, it waits one step
  ``pickup <colour> <type> <n>``       walk to a key, ball or box in view and pick it up; hands empty
  ``go through <colour> door <n>``     walk to an open door in view, onto it and one cell beyond (when that
                                       cell is taken, it stops in the doorway and says so)
  ``toggle and go through ...``        the same for a closed door, or a locked one while carrying a key of
                                       its colour: open it on the way
  ``toggle``                           open / close the door ahead (unlock it with its key), open the box
                                       ahead (it turns into what it held)
  ``drop``                             put the carried thing on the empty cell ahead
  ``check available actions``          answers the list; no time passes
  ==================================  ====================================================================

  High-level actions become minigrid's low-level steps along a shortest way
  (`plan.Reach`) over the cells the agent has seen in this episode (the
  known grid: unseen cells count as blocked; nothing changes out of sight, so
  what was seen stays true).  Any other text, or an action not available now,
  changes nothing and answers ``You cannot <action>: <reason>. Nothing
  changed.`` or ``Invalid action "<text>": choose one of the available
  actions. Nothing changed.``

* Every low-level step counts against the level's limit (minigrid's
  ``max_steps``), so a high-level action uses as many as it walks.  Reward is
  minigrid's: ``1 - 0.9 * step_count / max_steps`` on the low-level step that
  completes the mission, else 0; ``score`` is the episode's rewards
  so far.  Done on success (``You completed the mission. The episode is
  over.``), on a failed mission (``The mission failed. ...``: e.g. the wrong
  door first in a Debug level) or when minigrid runs out of steps (``You ran
  out of steps. ...``), after the action's own line when it ran to its end
  (an action cut short by the end of the episode reports only the end).
  Stepping a finished episode, or before any reset, is `EpisodeStateError`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

import gymnasium
import minigrid  # noqa: F401  (registers the BabyAI-* ids)
import numpy as np

from ..game import StepResult, require_episode, task_of
from .data import gym_id, task_level
from .plan import DROP, FORWARD, LEFT, PICKUP, RIGHT, TOGGLE, WAIT, Reach
from .view import Thing, describe, look, visible_cells

FORWARD_IF_FREE = -1  # a forward step taken only when the cell ahead is free then
CHECK = "check available actions"
_GENERATION = threading.Lock()  # stdout is swapped while a level generates: one at a time
_NAMED = re.compile(r"^(go to|pickup|go through|toggle and go through) (\w+ \w+ \d+)$")
_END = {"success": "You completed the mission.", "failure": "The mission failed.", "timeout": "You ran out of steps."}


@dataclass(frozen=True)
class Command:
    steps: tuple[int, ...]  # minigrid actions, or FORWARD_IF_FREE
    message: str
    blocked: str = ""  # the message when a FORWARD_IF_FREE step finds the cell ahead taken


def normalize(action: str) -> str:
    """``" Pick up  the Red Ball 1. "`` -> ``"pickup the red ball 1"`` (case, spaces, final full stop)."""
    text = " ".join(action.lower().split()).removesuffix(".").strip()
    return re.sub(r"\bpick up\b", "pickup", text)


class BabyAIEnv:
    """One BabyAI agent (see the module docstring)."""

    def __init__(self) -> None:
        self.gym: Any = None
        self.gym_id = ""
        self.seen = np.zeros((0, 0), dtype=bool)
        self.things: list[Thing] = []
        self.commands: dict[str, Command] = {}
        self.refusals: dict[str, str] = {}
        self.observation = ""
        self.reward = 0.0
        self.score = 0.0
        self.done = False
        self._image: np.ndarray | None = None

    # ------------------------------------------------------------------ episode
    def reset(self, task_id: int) -> str:
        level_id, (_, seed) = task_of(gym_id, task_id), task_of(task_level, task_id)
        if self.gym is None or level_id != self.gym_id:
            self.close()
            self.gym, self.gym_id = gymnasium.make(level_id, disable_env_checker=True).unwrapped, level_id
        with _GENERATION, contextlib.redirect_stdout(io.StringIO()):
            obs, _ = self.gym.reset(seed=seed)
        self.seen = np.zeros((self.gym.width, self.gym.height), dtype=bool)
        self.reward, self.score, self.done = 0.0, 0.0, False
        self._see(obs)
        return self._observe(None)

    def step(self, action: str) -> StepResult:
        require_episode(self.gym is not None, self.done)
        text = normalize(action)
        self.reward = 0.0
        if text == CHECK:
            message = "You can take the following actions: " + ", ".join(self.commands) + "."
        elif text in self.commands:
            message = self._run(self.commands[text])
        elif text in self.refusals:
            message = f"You cannot {text}: {self.refusals[text]}. Nothing changed."
        elif match := _NAMED.match(text):
            message = f"You cannot {text}: you see no {match.group(2)} now. Nothing changed."
        else:
            message = f'Invalid action "{action.strip()}": choose one of the available actions. Nothing changed.'
        return StepResult(self._observe(message), self.reward, self.done, {"score": self.score})

    def close(self) -> None:
        if self.gym is not None:
            self.gym.close()
            self.gym = None

    # ------------------------------------------------------------------ the world as the agent knows it
    def passable(self, x: int, y: int) -> bool:
        """Whether the agent may step onto (x, y): seen, on the grid, and empty or an open door."""
        if not (0 <= x < self.gym.width and 0 <= y < self.gym.height) or not self.seen[x, y]:
            return False
        cell = self.gym.grid.get(x, y)
        return cell is None or (cell.type == "door" and cell.is_open)

    def _see(self, obs: dict[str, Any]) -> None:
        self._image = obs["image"]
        for _, _, (x, y) in visible_cells(self.gym, self._image):
            self.seen[x, y] = True
        self.seen[tuple(self.gym.agent_pos)] = True

    def _run(self, command: Command) -> str:
        """Play ``command``'s low-level steps until they end or the episode does; the event line."""
        for index, code in enumerate(command.steps):
            if code == FORWARD_IF_FREE:
                if not self.passable(*self.gym.front_pos):
                    self.score += self.reward
                    return command.blocked
                code = FORWARD
            obs, reward, terminated, truncated, _ = self.gym.step(code)
            self._see(obs)
            self.reward += float(reward)
            if terminated or truncated:
                self.done = True
                self.score += self.reward
                end = "success" if self.reward > 0 else "failure" if terminated else "timeout"
                finished = all(rest == FORWARD_IF_FREE for rest in command.steps[index + 1 :])
                return f"{command.message + ' ' if finished else ''}{_END[end]} The episode is over."
        self.score += self.reward
        return command.message

    # ------------------------------------------------------------------ the observation and the action table
    def _observe(self, message: str | None) -> str:
        self.things = look(self.gym, self._image)
        self.commands, self.refusals = self._table()
        lines = [message] if message else []
        lines += [
            f"Your goal: {self.gym.mission}",
            describe(self.gym, self.things),
            "Available actions: " + json.dumps(list(self.commands)),
        ]
        self.observation = "\n".join(lines)
        return self.observation

    def _table(self) -> tuple[dict[str, Command], dict[str, str]]:
        """The actions valid now (with their steps) and, for the refused ones that name something, why not."""
        gym, carried = self.gym, self.gym.carrying
        front = gym.grid.get(*gym.front_pos)
        commands = {
            "turn left": Command((LEFT,), "You turned left."),
            "turn right": Command((RIGHT,), "You turned right."),
        }
        refusals: dict[str, str] = {}
        if self.passable(*gym.front_pos):
            commands["move forward"] = Command((FORWARD,), "You moved forward.")
        else:
            refusals["move forward"] = "the way ahead is blocked"
        reach = Reach(
            self.passable,
            (int(gym.agent_pos[0]), int(gym.agent_pos[1]), int(gym.agent_dir)),
            [t.pos for t in self.things],
        )
        no_way = "no known way leads to it"
        for thing in self.things:
            path = reach.path_to_face(thing.pos)
            name = thing.label
            if path is None:
                refusals[f"go to {name}"] = no_way
            elif path:
                commands[f"go to {name}"] = Command(tuple(path), f"You went to {name}.")
            else:
                commands[f"go to {name}"] = Command((WAIT,), f"You stayed where you are, facing {name}.")
            steps = tuple(path or ())
            if thing.kind != "door":
                if carried is not None:
                    refusals[f"pickup {name}"] = f"you are already carrying a {carried.color} {carried.type}"
                elif path is None:
                    refusals[f"pickup {name}"] = no_way
                else:
                    commands[f"pickup {name}"] = Command(steps + (PICKUP,), f"You picked up {name}.")
                continue
            refusals[f"pickup {name}"] = "a door cannot be picked up"
            through, opening = f"go through {name}", f"toggle and go through {name}"
            if thing.state == "open":
                refusals[opening] = "it is already open; go through it"
                if path is None:
                    refusals[through] = no_way
                else:
                    commands[through] = Command(
                        steps + (FORWARD, FORWARD_IF_FREE),
                        f"You went through {name}.",
                        f"You stepped into {name}; the cell beyond it is not free.",
                    )
                continue
            refusals[through] = f"it is {thing.state}; toggle it first"
            has_key = carried is not None and carried.type == "key" and carried.color == thing.colour
            if thing.state == "locked" and not has_key:
                refusals[opening] = f"it is locked and you are not carrying a {thing.colour} key"
            elif path is None:
                refusals[opening] = no_way
            else:
                verb = "unlocked" if thing.state == "locked" else "opened"
                commands[opening] = Command(
                    steps + (TOGGLE, FORWARD, FORWARD_IF_FREE),
                    f"You {verb} {name} and went through it.",
                    f"You {verb} {name} and stepped into it; the cell beyond it is not free.",
                )
        toggle = self._toggle(front, carried)
        if isinstance(toggle, Command):
            commands["toggle"] = toggle
        else:
            refusals["toggle"] = toggle
        if carried is None:
            refusals["drop"] = "you are not carrying anything"
        elif front is not None:
            refusals["drop"] = "the cell in front of you is not empty"
        else:
            commands["drop"] = Command((DROP,), f"You dropped the {carried.color} {carried.type}.")
        commands[CHECK] = Command((), "")
        return commands, refusals

    def _toggle(self, front: Any, carried: Any) -> Command | str:
        """The ``toggle`` command for the cell ahead, or why there is none."""
        ahead_thing = next((t for t in self.things if (t.front, t.right) == (1, 0)), None)
        name = ahead_thing.label if ahead_thing else "it"
        if front is not None and front.type == "box":
            return Command((TOGGLE,), f"You opened {name}.")
        if front is None or front.type != "door":
            return "there is no door or box in front of you"
        if front.is_open:
            return Command((TOGGLE,), f"You closed {name}.")
        if not front.is_locked:
            return Command((TOGGLE,), f"You opened {name}.")
        if carried is not None and carried.type == "key" and carried.color == front.color:
            return Command((TOGGLE,), f"You unlocked {name}.")
        return f"the door in front of you is locked and you are not carrying a {front.color} key"
