"""The HTTP contract every family-B env server keeps, checked on each one (on the session's shared server):

* a closed env is gone: every route naming it, a second ``/close`` included, answers 404 with the same message;
* bad input (a missing or mistyped field, an action over 4096 characters, a task id out of range, a bad query, a
  body that is not JSON) is a 4xx ``{"error": <message>}`` and leaves the env as it was.

WebShop (family A, whose ids are read leniently, as upstream does) has its own in `test_webshop_errors`; what only
one env has (a route, a field, a 409 before the first reset) stays in that env's test module.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import json_call
import pytest
import requests

from agentgym.launcher import ENVS
from agentgym.registry import get_env_spec
from agentgym.spawn import ServerUrl
from agentgym.spec import EnvSpec, load_object
from agentgym.splits import SPLIT_NAMES

call = partial(json_call.call, timeout_s=120)  # a create may start a JVM, a reset load a planned game
FAMILY_B = sorted(name for name in ENVS if get_env_spec(name).family == "B")
KNOWN_NUM_TASKS = {
    "alfworld": 3600,
    "babyai": 4000,
    "frozenlake": 1300,
    "maze": 260,
    "sciworld": 4639,
    "sokoban": 1300,
    "textcraft": 544,
    "wordle": 2135,
}
SLOW = {"alfworld", "frozenlake", "sciworld", "sokoban", "textcraft"}
ACTION = "look"
HUGE = 10**30


def num_tasks(spec: EnvSpec) -> int:
    """How many task ids the server takes (``0 <= id < n``): those of the env's train, dev and test lists."""
    task_list = load_object(spec.tasks)
    return len({task_id for split in SPLIT_NAMES for task_id, _ in task_list(split)})


def test_the_task_lists_cover_each_known_env_s_task_range() -> None:
    assert {name: num_tasks(get_env_spec(name)) for name in KNOWN_NUM_TASKS} == KNOWN_NUM_TASKS


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in FAMILY_B])
def env(request: pytest.FixtureRequest, env_server: Callable[[str], ServerUrl]) -> tuple[EnvSpec, ServerUrl]:
    return get_env_spec(request.param), env_server(request.param)


def reset_body(spec: EnvSpec, env_id: Any, task: Any) -> dict[str, Any]:
    return {"id": env_id, spec.reset_field: task, **spec.reset_extra}


def test_a_closed_env_is_gone_from_every_route(env: tuple[EnvSpec, ServerUrl]) -> None:
    spec, server = env
    p = spec.prefix
    env_id = call(server, "POST", f"{p}/create")["id"]
    call(server, "POST", f"{p}/reset", reset_body(spec, env_id, 1))
    assert env_id in call(server, "GET", f"{p}/list_envs")
    assert call(server, "POST", f"{p}/close", {"id": env_id}) is True
    assert env_id not in call(server, "GET", f"{p}/list_envs")
    gone = {"error": f"unknown id {env_id}: create one with POST /create"}
    assert call(server, "POST", f"{p}/step", {"id": env_id, "action": ACTION}, status=404) == gone
    assert call(server, "POST", f"{p}/reset", reset_body(spec, env_id, 0), status=404) == gone
    assert call(server, "GET", f"{p}/observation", params={"id": env_id}, status=404) == gone
    assert call(server, "POST", f"{p}/close", {"id": env_id}, status=404) == gone


def test_bad_input_is_a_4xx_with_a_message_and_changes_nothing(env: tuple[EnvSpec, ServerUrl]) -> None:
    spec, server = env
    p, field, n = spec.prefix, spec.reset_field, num_tasks(spec)
    env_id = call(server, "POST", f"{p}/create")["id"]
    call(server, "POST", f"{p}/reset", reset_body(spec, env_id, 1))
    before = call(server, "GET", f"{p}/observation", params={"id": env_id})
    not_int, not_str = "Input should be a valid integer", "action: Input should be a valid string"
    out_of_range = f"invalid request: {field} {{}} out of range: expected 0 <= {field} < {n}"
    unknown = f"unknown id {HUGE}: create one with POST /create"
    cases = [
        ("POST", "/step", {"action": ACTION}, None, 422, "invalid request: id: Field required"),
        ("POST", "/step", {"id": env_id}, None, 422, "invalid request: action: Field required"),
        ("POST", "/step", {"id": str(env_id), "action": ACTION}, None, 422, f"invalid request: id: {not_int}"),
        ("POST", "/step", {"id": True, "action": ACTION}, None, 422, f"invalid request: id: {not_int}"),
        ("POST", "/step", {"id": False, "action": ACTION}, None, 422, f"invalid request: id: {not_int}"),
        ("POST", "/step", {"id": env_id, "action": [ACTION]}, None, 422, f"invalid request: {not_str}"),
        ("POST", "/step", {"id": env_id, "action": None}, None, 422, f"invalid request: {not_str}"),
        (
            "POST",
            "/step",
            {"id": env_id, "action": "x" * 4097},
            None,
            422,
            "invalid request: action: String should have at most 4096 characters",
        ),
        ("POST", "/step", {"id": HUGE, "action": ACTION}, None, 404, unknown),
        ("POST", "/reset", {field: 0, **spec.reset_extra}, None, 422, "invalid request: id: Field required"),
        ("POST", "/reset", reset_body(spec, str(env_id), 0), None, 422, f"invalid request: id: {not_int}"),
        ("POST", "/reset", reset_body(spec, env_id, n), None, 422, out_of_range.format(n)),
        ("POST", "/reset", reset_body(spec, env_id, -1), None, 422, out_of_range.format(-1)),
        ("POST", "/reset", reset_body(spec, env_id, HUGE), None, 422, out_of_range.format(HUGE)),
        ("POST", "/reset", reset_body(spec, env_id, "3"), None, 422, f"invalid request: {field}: {not_int}"),
        ("POST", "/reset", reset_body(spec, env_id, 2.5), None, 422, f"invalid request: {field}: {not_int}"),
        ("POST", "/reset", reset_body(spec, env_id, True), None, 422, f"invalid request: {field}: {not_int}"),
        ("POST", "/close", {"id": "0"}, None, 422, 'invalid request: body must be {"id": <int>}'),
        ("POST", "/close", {}, None, 422, 'invalid request: body must be {"id": <int>}'),
        ("GET", "/observation", None, None, 422, "invalid request: query.id: Field required"),
        (
            "GET",
            "/observation",
            None,
            {"id": "zero"},
            422,
            f"invalid request: query.id: {not_int}, unable to parse string as an integer",
        ),
        ("GET", "/observation", None, {"id": str(HUGE)}, 404, unknown),
    ]
    for method, path, body, params, status, message in cases:
        assert call(server, method, p + path, body, params, status=status) == {"error": message}, (path, body, params)
    for path, raw in (("/step", b"{not json"), ("/reset", b"[1,")):
        r = requests.post(server + p + path, data=raw, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 422 and r.json()["error"].startswith("invalid request: body is not valid JSON")
    assert call(server, "GET", f"{p}/observation", params={"id": env_id}) == before
    assert call(server, "POST", f"{p}/close", {"id": env_id}) is True
