"""Play on an env object in process (no server): ``play`` steps a policy from an observation, ``play_task`` resets
an expert and the env on a task first; ``started`` resets the env and plays given actions, ``play_on`` plays actions
that must not end the episode and ``assert_step`` checks one action's answer; ``assert_wins_at_the_end`` and
``assert_runs_out`` check how an episode ends.

    played = play_task(get_expert("sokoban"), SokobanEnv(), 3, max_steps=60)
    played.result.reward, played.actions, played.first_lines
    env = started(SokobanEnv(), 0, "up")
    assert_step(env, "left", "You moved left. ...", 0.0, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from agentgym.game import StepResult

E = TypeVar("E")


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


def started(env: E, task_id: int, *actions: str) -> E:
    """``env`` reset to ``task_id``, with ``actions`` played."""
    env.reset(task_id)  # type: ignore[attr-defined]
    for action in actions:
        env.step(action)  # type: ignore[attr-defined]
    return env


def play_on(env: Any, actions: list[str]) -> None:
    """Play ``actions``, none of which ends the episode."""
    for action in actions:
        assert env.step(action).done is False, action


def assert_step(env: Any, action: str, observation: str, reward: float = 0.0, done: bool = False) -> StepResult:
    """``env.step(action)`` answers ``observation``, ``reward`` and ``done``; its result."""
    result = env.step(action)
    assert (result.observation, result.reward, result.done) == (observation, reward, done), action
    return result


def assert_wins_at_the_end(env: Any, actions: list[str], label: Any) -> list[StepResult]:
    """Playing ``actions`` pays nothing and goes on until the last, which pays 1.0 and ends the episode (a failure
    names ``label``); the results."""
    results = [env.step(action) for action in actions]
    assert [r.reward for r in results] == [0.0] * (len(results) - 1) + [1.0], label
    assert [r.done for r in results] == [False] * (len(results) - 1) + [True], label
    return results


def assert_runs_out(env: Any, action: str, moves: int, observation: str) -> None:
    """Playing ``action`` ``moves`` times, the episode goes on until the last, which ends it without reward and
    answers ``observation``."""
    play_on(env, [action] * (moves - 1))
    assert_step(env, action, observation, 0.0, True)
