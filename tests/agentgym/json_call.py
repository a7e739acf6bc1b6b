"""`call`: one HTTP request to an env server that must answer JSON with the expected status; the answer, parsed.
`server_of(name)`: a test module's ``server`` fixture, the session's shared server of env ``name``.
`own_server(name)`: a server of the test's own (ids start at 0), checked healthy; `assert_closes_the_only_env`: its
env 0 closes and leaves none.
`step_answer` and `episode_answer`: the JSON a ``/step`` answers, and the one a ``/create`` or ``/reset`` answers
when it starts an episode."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest
import requests

from agentgym.spawn import ServerUrl, serve_subprocess


def call(
    url: str, method: str, path: str, body: Any = None, params: Any = None, status: int = 200, timeout_s: float = 10.0
) -> Any:
    r = requests.request(method, url + path, json=body, params=params, timeout=timeout_s)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    return r.json()


def step_answer(observation: str, reward: float = 0.0, done: bool = False, **extra: Any) -> dict[str, Any]:
    """A ``/step`` answer: ``observation``, ``reward``, ``done`` and the env's own fields ``extra`` (BabyAI's and
    SciWorld's ``score``, ALFWorld's ``available_actions``)."""
    return {"observation": observation, "reward": reward, "done": done, **extra}


def episode_answer(observation: str, env_id: int = 0, **extra: Any) -> dict[str, Any]:
    """The answer that starts an episode of env ``env_id`` at ``observation`` (a family-B ``/create``, a
    ``/reset``): the id and a `step_answer` that pays nothing and is not done."""
    return {"id": env_id, **step_answer(observation, **extra)}


def server_of(name: str) -> Any:
    """``server = server_of("maze")`` in a test module: its module-scoped ``server`` fixture, the URL of the
    session's server of env ``name`` (the ``env_server`` fixture)."""

    @pytest.fixture(scope="module")
    def server(env_server: Callable[[str], ServerUrl]) -> ServerUrl:
        return env_server(name)

    return server


@contextmanager
def own_server(name: str, timeout_s: float = 60.0, **options: Any) -> Iterator[ServerUrl]:
    """A server of env ``name`` for the ``with`` block, the test's own, so ids start at 0 (``serve_subprocess``
    with ``options``); it answers ``GET /`` with "ok"."""
    with serve_subprocess(name, timeout_s=timeout_s, **options) as url:
        assert call(url, "GET", "/") == "ok"
        yield url


def assert_closes_the_only_env(url: str, timeout_s: float = 10.0) -> None:
    """Env 0 is the only env listed; ``POST /close`` of it answers true, and none is left."""
    assert call(url, "GET", "/list_envs", timeout_s=timeout_s) == [0]
    assert call(url, "POST", "/close", {"id": 0}, timeout_s=timeout_s) is True
    assert call(url, "GET", "/list_envs", timeout_s=timeout_s) == []
