"""Bad requests get clear 4xx JSON errors; the server stays up and other envs are untouched."""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import pytest
import requests
from webshop_client import Client

pytestmark = pytest.mark.slow

MAX_ACTION_CHARS = 4096


@pytest.fixture()
def bystander(server: str) -> Iterator[Client]:
    """An env in the middle of an episode, checked after the bad calls."""
    c = Client(server)
    c.reset(4)
    c.step("search[wireless earbuds]")
    yield c
    c.close()


def call(server: str, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    r = requests.request(method, server + path, timeout=10, **kw)
    assert r.headers["content-type"] == "application/json"
    return r.status_code, r.json()


def assert_unharmed(server: str, bystander: Client, before: str) -> None:
    assert call(server, "GET", "/") == (200, "ok")
    assert bystander.get("/observation") == before
    assert bystander.step("click[next >]")["state"].startswith("Instruction: [SEP]")


def test_unknown_env_is_404(server: str, bystander: Client) -> None:
    before = bystander.get("/observation")
    missing = {"error": "unknown env_idx 999999: create one with POST /create"}
    assert call(server, "POST", "/reset", json={"env_idx": 999999, "session_id": 0}) == (404, missing)
    assert call(server, "POST", "/step", json={"env_idx": 999999, "action": "search[x]"}) == (404, missing)
    assert call(server, "POST", "/close", json={"env_idx": 999999}) == (404, missing)
    for path in ("/observation", "/available_actions", "/instruction_text", "/state"):
        assert call(server, "GET", path, params={"env_idx": 999999}) == (404, missing)
    assert call(server, "GET", "/no_such_route") == (404, {"error": "Not Found"})
    assert_unharmed(server, bystander, before)


def test_malformed_bodies_are_422(server: str, bystander: Client) -> None:
    before = bystander.get("/observation")
    env = bystander.env_idx
    json_header = {"content-type": "application/json"}
    status, body = call(server, "POST", "/step", data=b'{"env_idx": 0, "action": ', headers=json_header)
    assert status == 422 and body["error"].startswith("invalid request: body is not valid JSON")
    status, body = call(server, "POST", "/step", data=b'{"env_idx": 0, "action": "\xff\xfe"}', headers=json_header)
    assert status == 422 and body["error"].startswith("invalid request: body is not valid JSON")
    assert call(server, "POST", "/step", json={"env_idx": env}) == (
        422,
        {"error": "invalid request: action: Field required"},
    )
    assert call(server, "POST", "/step", json={"env_idx": "abc", "action": "click[next >]"}) == (
        422,
        {"error": "invalid request: env_idx: Input should be a valid integer, unable to parse string as an integer"},
    )
    assert call(server, "POST", "/step", json=[env, "click[next >]"]) == (
        422,
        {"error": "invalid request: body: Input should be a valid dictionary or object to extract fields from"},
    )
    assert call(server, "GET", "/observation") == (422, {"error": "invalid request: query.env_idx: Field required"})
    assert call(server, "POST", "/close", json={"env_idx": "x"}) == (
        422,
        {"error": 'invalid request: body must be {"env_idx": <int>}'},
    )
    assert call(server, "POST", "/reset", json={"env_idx": env, "session_id": 10**9}) == (
        422,
        {"error": "session_id 1000000000 out of range: expected 0 <= session_id < 2361"},
    )
    assert_unharmed(server, bystander, before)


def test_long_and_binary_actions(server: str, bystander: Client) -> None:
    before = bystander.get("/observation")
    c = Client(server)
    start = c.reset(0)
    too_long = "search[" + "a" * MAX_ACTION_CHARS + "]"
    assert call(server, "POST", "/step", json={"env_idx": c.env_idx, "action": too_long}) == (
        422,
        {"error": f"invalid request: action: String should have at most {MAX_ACTION_CHARS} characters"},
    )
    longest = "click[" + "b" * (MAX_ACTION_CHARS - 7) + "]"
    assert c.step(longest) == {"state": start, "reward": 0.0, "done": False, "info": None}
    for action in ("\x00\x01\x02", "click[\x00]", "\ud7ff\ufffd" * 50, "search[\x00\x1b[31m]"):
        r = c.step(action)
        assert (r["reward"], r["done"]) == (0.0, False)
    c.close()
    assert_unharmed(server, bystander, before)


def test_step_after_done_is_409(server: str, shop: Any) -> None:
    c = Client(server)
    status, body = call(server, "POST", "/step", json={"env_idx": c.env_idx, "action": "search[x]"})
    assert (status, body) == (409, {"error": "no episode yet: POST /reset first"})
    target = shop.by_asin[shop.goal(0).asin]
    c.reset(0)
    c.step(f"search[{target.title}]")
    c.step(f"click[{target.asin}]")
    assert c.step("click[buy now]")["done"] is True
    done = {"error": "episode is done (bought an item): POST /reset to start a new one"}
    for action in ("click[buy now]", "click[back to search]", "search[x]"):
        assert call(server, "POST", "/step", json={"env_idx": c.env_idx, "action": action}) == (409, done)
    assert c.get("/observation").startswith("Thank you for shopping with us!")
    assert c.reset(1).startswith("WebShop [SEP]")  # a reset starts over
    c.close()
    assert call(server, "POST", "/close", json={"env_idx": c.env_idx}) == (
        404,
        {"error": f"unknown env_idx {c.env_idx}: create one with POST /create"},
    )


@pytest.fixture(scope="module")
def capped(start_server: Callable[..., Any]) -> Iterator[str]:
    with start_server("--max-envs", "4") as url:
        yield url


def test_env_cap_is_503(capped: str) -> None:
    ids = [call(capped, "POST", "/create")[1] for _ in range(4)]
    assert ids == [0, 1, 2, 3]
    full = requests.post(capped + "/create", timeout=10)
    body = full.json()
    assert body.pop("longest_idle_s") < 60
    assert (full.status_code, full.headers["Retry-After"], body) == (
        503,
        str(body["retry_after_s"]),
        {
            "error": (
                "env cap reached: 4 of 4 envs are open; close some with POST /close or start the server with "
                "a larger --max-envs"
            ),
            "open": 4,
            "max_envs": 4,
            "idle_envs": 4,
            "evict_idle_s": 120.0,  # the servers' default
            "retry_after_s": body["retry_after_s"],
        },
    )
    assert 60 < body["retry_after_s"] <= 120
    assert call(capped, "POST", "/close", json={"env_idx": 2}) == (200, True)
    assert call(capped, "POST", "/create") == (200, 4)
    for env in (0, 1, 3, 4):
        call(capped, "POST", "/close", json={"env_idx": env})
    assert call(capped, "GET", "/list_envs") == (200, [])


def test_cap_holds_under_concurrent_creates(capped: str) -> None:
    results: list[tuple[int, Any]] = []
    lock = threading.Lock()

    def create() -> None:
        got = call(capped, "POST", "/create")
        with lock:
            results.append(got)

    threads = [threading.Thread(target=create) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = sorted(body for status, body in results if status == 200)
    assert len(created) == 4 and len(set(created)) == 4
    assert sorted(status for status, _ in results) == [200] * 4 + [503] * 12
    assert call(capped, "GET", "/list_envs") == (200, created)
    for env in created:
        call(capped, "POST", "/close", json={"env_idx": env})
