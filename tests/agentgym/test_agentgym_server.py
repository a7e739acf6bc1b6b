"""The server base: registry semantics and the shared routes of both protocol families (in process)."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from agentgym.server import EnvCapacityError, EnvRegistry, Family, UnknownEnvError, create_app


class Dummy:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_registry_counts_up_caps_and_never_reuses_ids() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=2, id_name="id")
    assert [reg.create(), reg.create()] == [0, 1]
    with pytest.raises(EnvCapacityError, match="env cap reached: 2 of 2 envs are open"):
        reg.create()
    with reg.use(0) as env:
        first = env
    reg.close(0)
    assert first.closed
    assert reg.create() == 2 and reg.ids() == [1, 2] and len(reg) == 2
    with pytest.raises(UnknownEnvError, match="unknown id 0"):
        reg.close(0)
    with pytest.raises(UnknownEnvError, match="unknown id 7"):
        with reg.use(7):
            pass


def test_close_waits_for_a_call_in_flight() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=4)
    env_id = reg.create()
    inside = threading.Event()
    seen: list[bool] = []

    def slow_call() -> None:
        with reg.use(env_id) as env:
            inside.set()
            time.sleep(0.2)
            seen.append(env.closed)

    t = threading.Thread(target=slow_call)
    t.start()
    inside.wait()
    reg.close(env_id)  # blocks until slow_call leaves the env
    t.join()
    assert seen == [False]
    with pytest.raises(UnknownEnvError):
        with reg.use(env_id):
            pass


def test_failed_factory_frees_its_slot() -> None:
    def broken() -> Dummy:
        raise RuntimeError("boom")

    reg: EnvRegistry[Dummy] = EnvRegistry(broken, max_envs=1)
    for _ in range(3):
        with pytest.raises(RuntimeError):
            reg.create()
    assert len(reg) == 0


def test_family_b_routes() -> None:
    app = create_app("test", EnvRegistry(Dummy, max_envs=1, id_name="id"), Family.B)
    client = TestClient(app)
    assert client.get("/").json() == "ok"
    assert client.post("/create").json() == {"id": 0}
    r = client.post("/create")
    assert (r.status_code, r.json()["error"].startswith("env cap reached")) == (503, True)
    assert client.get("/list_envs").json() == [0]
    assert client.post("/close", json={"id": 0}).json() is True
    r = client.post("/close", json={"id": 0})
    assert (r.status_code, r.json()) == (404, {"error": "unknown id 0: create one with POST /create"})
    r = client.post("/close", json={"env_idx": 1})
    assert (r.status_code, r.json()) == (422, {"error": 'invalid request: body must be {"id": <int>}'})


def test_unexpected_errors_are_500_without_traceback() -> None:
    def broken() -> Dummy:
        raise RuntimeError("secret internals")

    app = create_app("test", EnvRegistry(broken, max_envs=1), Family.A)
    r = TestClient(app, raise_server_exceptions=False).post("/create")
    assert (r.status_code, r.json()) == (500, {"error": "internal server error (RuntimeError); see the server log"})
    assert "secret" not in r.text and "Traceback" not in r.text
