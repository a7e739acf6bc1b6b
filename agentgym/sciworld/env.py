"""One SciWorld env: a ScienceWorld simulator in its own JVM, stepped without computing the valid actions.

* Building a `SciWorldEnv` starts the JVM (``java`` must be on PATH; about 2 s);
  `close` shuts it down and waits for the process to exit.
* ``reset(data_idx)`` loads the task's variation (`data.task`) with the
  server's ``simplifications`` and answers the task and the first
  observation: the simulator's ``look around``.
* ``step(action)`` sends the action text to the simulator as it is.  The score
  is the simulator's progress, 0..100 (rounded; negative when the task is
  failed); ``reward`` is the change of score this step.  Done when the
  simulator says the task is complete, when the score turns negative, or after
  ``max_steps`` actions.  Text the simulator does not understand answers its
  own ``No known action matches that input.`` and changes nothing.  Stepping
  a finished episode, or before any reset, is `EpisodeStateError`.
* ``action_hint()``: the valid actions now (the slow call, about 140 ms, that
  a plain step skips); ``task_description()``.
"""

from __future__ import annotations

import logging
import os
import subprocess
from typing import Any

from ..game import StepResult, require_episode, task_of
from ..open_envs import InvalidRequestError
from .data import Task, task

DEFAULT_MAX_STEPS = 100
JVM_HEAP = "768m"
SIMPLIFICATIONS = (
    "easy",
    "teleportAction",
    "selfWateringFlowerPots",
    "openContainers",
    "openDoors",
    "noElectricalAction",
)
JVM_EXIT_WAIT_S = 10.0


def start_simulator() -> Any:
    """A ScienceWorld simulator with its own JVM (scienceworld's wrapper; its per-step extras are not used).

    The JVM's heap is capped at `JVM_HEAP` unless ``JAVA_TOOL_OPTIONS`` already sets one: Java's default, a
    quarter of the machine's memory per JVM, lets a few idle envs hold gigabytes.
    """
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from scienceworld import ScienceWorldEnv

    options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    if "-Xmx" not in options:
        os.environ["JAVA_TOOL_OPTIONS"] = f"{options} -Xmx{JVM_HEAP}".strip()
    return ScienceWorldEnv("")


class SciWorldEnv:
    """One simulator and its episode (see the module docstring)."""

    def __init__(self, simplifications: str = "", max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.simplifications = simplifications
        self.max_steps = max_steps
        self.sim = start_simulator()
        self.task: Task | None = None
        self.observation = ""
        self.score = 0.0
        self.done = False
        self.steps = 0

    def reset(self, data_idx: int, gold_path: bool = False) -> dict[str, Any]:
        """Load task ``data_idx`` (``gold_path``: also have the simulator plan its gold path, ~0.3 s more)."""
        self.task = task_of(task, data_idx)
        try:
            self.sim.load(self.task.name, self.task.variation, self.simplifications, generateGoldPath=gold_path)
        except ValueError as bad:  # e.g. noElectricalAction on an electrical task
            raise InvalidRequestError(f"invalid request: task {self.task.task_id}: {bad}") from None
        self.sim.server.reset()
        self.observation = str(self.sim.server.step("look around"))
        self.score, self.done, self.steps = 0.0, False, 0
        return {
            "task_name": self.task.name,
            "var_num": self.task.variation,
            "task_description": self.task_description(),
            "observation": self.observation,
            "reward": 0.0,
            "score": 0.0,
            "deleted": False,
            "done": False,
        }

    def step(self, action: str) -> StepResult:
        require_episode(self.task is not None, self.done)
        server = self.sim.server
        self.observation = str(server.step(action))
        self.steps += 1
        score = float(round(100 * server.getScore()))
        reward, self.score = score - self.score, score
        self.done = bool(server.getCompleted()) or score < 0 or self.steps >= self.max_steps
        return StepResult(self.observation, reward, self.done, {"score": score})

    def gold_path(self) -> list[str]:
        """The simulator's gold action sequence of the loaded task (needs ``reset(..., gold_path=True)``)."""
        return [str(a) for a in self.sim.get_gold_action_sequence()]

    def action_hint(self) -> list[str]:
        require_episode(self.task is not None, False)
        return [str(a) for a in self.sim.get_valid_action_object_combinations()]

    def task_description(self) -> str:
        require_episode(self.task is not None, False)
        return str(self.sim.get_task_description())

    def close(self) -> None:
        """Shut the simulator down and wait for its JVM to exit (killed if it does not within 10 s)."""
        if self.sim is None:
            return
        process: subprocess.Popen = self.sim._gateway.java_process
        self.sim.close()
        try:
            process.wait(JVM_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.sim = None
