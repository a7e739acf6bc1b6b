"""Play a policy on an env object in process (no server): ``play`` steps from an observation, ``play_task`` resets
an expert and the env on a task first.

    played = play_task(get_expert("sokoban"), SokobanEnv(), 3, max_steps=60)
    played.result.reward, played.actions, played.first_lines
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from agentgym.game import StepResult


@dataclass
class Played:
    """One episode: each action, the observation after it, and the last step's result."""

    actions: list[str]
    observations: list[str]
    result: StepResult

    @property
    def first_lines(self) -> list[str]:
        """The first line of each observation: what the env said the action did."""
        return [observation.split("\n")[0] for observation in self.observations]


def play(env: Any, act: Callable[[str], str], observation: str, max_steps: int) -> Played:
    """Step ``env`` with ``act(observation)``, from ``observation``, until the episode ends or ``max_steps``
    actions were played."""
    actions: list[str] = []
    observations: list[str] = []
    for _ in range(max_steps):
        actions.append(act(observation))
        result = env.step(actions[-1])
        observation = result.observation
        observations.append(observation)
        if result.done:
            break
    return Played(actions, observations, result)


def play_task(expert: Any, env: Any, task_id: int, max_steps: int) -> Played:
    """``expert`` (re-seeded with the task id) on ``env`` reset to ``task_id``, whose reset answers the first
    observation."""
    expert.reset(seed=task_id)
    return play(env, expert.act, env.reset(task_id), max_steps)
