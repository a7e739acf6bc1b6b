"""Checks that each game env's tests make with the env's own values: the ids of its splits (`assert_split_ids`),
its refusal of task ids out of range (`assert_refuses_out_of_range`) and of a step before any reset
(`assert_needs_an_episode`), and its expert's refusal of a noise outside [0, 1] (`assert_noise_refused`).

    assert_split_ids(task_ids, range(200), range(200, 300), range(300, 1300))
    assert_refuses_out_of_range(env.reset, "data_idx", 1300)
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from agentgym.open_envs import EpisodeStateError, InvalidRequestError


def assert_split_ids(task_ids: Callable[[str], list[int]], test: range, dev: range, train: range) -> None:
    """``task_ids`` gives the ids of ``test``, ``dev`` and ``train`` for the three splits, and refuses an unknown
    split."""
    assert (task_ids("test"), task_ids("dev"), task_ids("train")) == (list(test), list(dev), list(train))
    with pytest.raises(ValueError, match="unknown split 'val'"):
        task_ids("val")


def assert_refuses_out_of_range(
    reset: Callable[[int], Any], field: str, count: int, error: type[Exception] = InvalidRequestError
) -> None:
    """``reset`` of each of -1, ``count`` and 10**30 raises ``error`` saying
    "<field> <id> out of range: expected 0 <= <field> < <count>"."""
    for task_id in (-1, count, 10**30):
        with pytest.raises(error, match=rf"{field} {task_id} out of range: expected 0 <= {field} < {count}"):
            reset(task_id)


def assert_needs_an_episode(env: Any, action: str, match: str = "no episode yet", observation: bool = False) -> None:
    """With no episode, ``env.step(action)`` (and, if ``observation``, reading ``env.observation``) raises
    `EpisodeStateError` matching ``match``."""
    with pytest.raises(EpisodeStateError, match=match):
        env.step(action)
    if observation:
        with pytest.raises(EpisodeStateError, match=match):
            _ = env.observation


def assert_noise_refused(env: str, noise: float) -> None:
    """``get_expert(env, noise=noise)`` raises ValueError: "noise must be in [0, 1], got <noise>"."""
    from openmanus_rl.experts import get_expert

    with pytest.raises(ValueError, match=rf"noise must be in \[0, 1\], got {noise}"):
        get_expert(env, noise=noise)
