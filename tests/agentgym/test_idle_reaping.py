"""Abandoned envs expire, on real servers of each kind: family A (WebShop), family B (TextCraft, BabyAI), an env
that is a JVM (SciWorld) and one that holds a planner's engine (ALFWorld).

Each test fills the env cap with envs a client left open (created, reset, never closed, as by a client that died),
sees ``/create`` refused, waits past a short ``--idle-timeout-s`` and finds the envs reaped by the server's sweep:
``GET /health`` counts them, a request naming one answers 410, create/reset/step/close works again, and the
server's memory (with its children: SciWorld's JVMs) is back near what it was before the abandoned envs.
"""

from __future__ import annotations

import re
import time
from contextlib import AbstractContextManager
from typing import Any, Callable

import psutil
import pytest
import requests
from waiting import wait_until

from agentgym.registry import get_env_spec
from agentgym.spawn import ServerUrl, serve_subprocess
from openmanus_rl.envs import EnvClient, RetryPolicy

CAP = 3
# long enough that none of the abandoned envs expires while the next ones are made (a JVM takes seconds to start)
IDLE_S = {"sciworld": 20.0, "alfworld": 10.0}
DEFAULT_IDLE_S = 2.0
ACTIONS = {
    "webshop": "search[red shoes]",
    "textcraft": "inventory",
    "babyai": "turn left",
    "sciworld": "look around",
    "alfworld": "look",
}
TASKS = {"webshop": 7, "textcraft": 3, "babyai": 5, "sciworld": 21, "alfworld": 3}
# what the server may keep after the abandoned envs are gone: allocator noise, and py4j's per-gateway state for the
# JVMs (a leaked JVM alone would be ~100 MB)
SLACK_MB = {"sciworld": 40.0}
DEFAULT_SLACK_MB = 15.0
HELD_MB = {"sciworld": 300.0}  # three JVMs (about 410 MB measured): what the reaping must give back


def total_rss_mb(pid: int) -> float:
    """The server's RSS plus its children's (SciWorld's JVMs), in MiB."""
    process = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 2**20


def episode(name: str, url: str, close: bool = True) -> EnvClient:
    """Create, reset and step one env of ``name`` (and close it unless told not to); the client."""
    client = EnvClient(get_env_spec(name), url, RetryPolicy(120, 0, 0.1))
    client.create()
    assert client.reset(TASKS[name]).strip()
    assert client.step(ACTIONS[name]).observation
    if close:
        client.close()
    return client


def health(url: str) -> dict[str, Any]:
    r = requests.get(url + "/health", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def check_abandoned_envs_expire(name: str, url: ServerUrl) -> None:
    spec, idle_s = get_env_spec(name), IDLE_S.get(name, DEFAULT_IDLE_S)
    for client in [episode(name, url, close=False) for _ in range(CAP)]:
        client.close()  # a full round, closed properly: caches and engine pools are warm
    baseline = total_rss_mb(url.pid)

    abandoned = [episode(name, url, close=False) for _ in range(CAP)]
    for client in abandoned:  # one more call each, so that none is near its timeout when the cap is tested
        client.observe()
    assert total_rss_mb(url.pid) - baseline >= HELD_MB.get(name, 0.0)
    r = requests.post(url + "/create", timeout=60)
    body = r.json()
    assert (r.status_code, body["error"], body["open"], body["idle_envs"]) == (
        503,
        f"env cap reached: {CAP} of {CAP} envs are open; close some "
        "with POST /close or start the server with a larger --max-envs",
        CAP,
        CAP,
    )
    assert health(url)["open"] == CAP

    wait_until(lambda: health(url)["reaped"] >= CAP, f"{CAP} idle envs reaped", idle_s + 30, poll_s=0.1)
    assert health(url) == {
        "open": 0,
        "max_envs": CAP,
        "reaped": CAP,
        "idle_timeout_s": idle_s,
        "in_flight": 0,
        "oldest_request_s": 0.0,
    }
    gone = abandoned[0].env_id
    r = requests.post(url + "/step", json={spec.id_field: gone, "action": ACTIONS[name]}, timeout=10)
    assert (r.status_code, r.json()) == (
        410,
        {
            "error": f"{spec.id_field} {gone} expired after {idle_s:g} s idle and was closed; "
            "create a new env with POST /create"
        },
    )
    assert requests.get(url + "/", timeout=10).json() == "ok"  # GET / is unchanged

    episode(name, url)  # create, reset, step, close work again
    assert psutil.Process(url.pid).children(recursive=True) == []  # no JVM left behind
    grown_mb = total_rss_mb(url.pid) - baseline
    assert grown_mb < SLACK_MB.get(name, DEFAULT_SLACK_MB), (name, grown_mb)


def server_args(name: str) -> tuple[str, ...]:
    return "--max-envs", str(CAP), "--idle-timeout-s", str(IDLE_S.get(name, DEFAULT_IDLE_S)), "--evict-idle-s", "0"


EVICT_S = 2.0


def test_a_full_server_makes_room_for_a_new_client(start_server: Callable[..., AbstractContextManager[ServerUrl]]):
    """A crashed client's envs fill the cap; the idle timeout is long (600 s), but a fresh client's /create waits
    at most ``--evict-idle-s`` (the 503's Retry-After says how long) and then plays a whole episode."""
    spec = get_env_spec("webshop")
    with start_server("--max-envs", str(CAP), "--evict-idle-s", str(EVICT_S)) as url:
        abandoned = [episode("webshop", url, close=False) for _ in range(CAP)]
        r = requests.post(url + "/create", timeout=10)
        assert r.status_code == 503 and r.json()["evict_idle_s"] == EVICT_S
        assert 1 <= int(r.headers["Retry-After"]) <= EVICT_S
        started = time.monotonic()
        episode("webshop", url)  # the client's 503 retries wait for room: create, reset, step, close
        assert time.monotonic() - started < EVICT_S + 5
        first = abandoned[0].env_id  # the one idle longest went
        r = requests.post(url + "/step", json={spec.id_field: first, "action": ACTIONS["webshop"]}, timeout=10)
        assert r.status_code == 410
        assert re.fullmatch(
            rf"{spec.id_field} {first} was closed after [2-7] s idle to make room for a new env at the cap of {CAP} "
            rf"\(--evict-idle-s {EVICT_S:g}\); create a new env with POST /create",
            r.json()["error"],
        )
        assert health(url)["reaped"] == 1 and health(url)["open"] == CAP - 1


def test_webshop_abandoned_envs_expire(start_server: Callable[..., AbstractContextManager[ServerUrl]]) -> None:
    with start_server(*server_args("webshop")) as url:
        check_abandoned_envs_expire("webshop", url)


@pytest.mark.parametrize("name", ["textcraft", "babyai"])
def test_family_b_abandoned_envs_expire(name: str) -> None:
    with serve_subprocess(name, timeout_s=60, args=server_args(name)) as url:
        check_abandoned_envs_expire(name, url)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sciworld", "alfworld"])
def test_jvm_and_planner_envs_expire_and_free_their_resources(name: str) -> None:
    with serve_subprocess(name, timeout_s=120, args=server_args(name)) as url:
        check_abandoned_envs_expire(name, url)
