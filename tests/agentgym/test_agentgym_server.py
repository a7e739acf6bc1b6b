"""The server base: the open envs' semantics (`agentgym.open_envs`: cap, idle expiry, in-flight calls) and the
shared routes of both protocol families (`agentgym.server`, in process)."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from waiting import wait_until

from agentgym.open_envs import EnvCapacityError, EnvExpiredError, EnvRegistry, UnknownEnvError
from agentgym.server import FAULT_INJECTION_ENV, create_app


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


def test_a_full_registry_evicts_the_env_idle_longest_once_idle_long_enough() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=2, id_name="id", idle_timeout_s=600, evict_idle_s=0.2)
    assert [reg.create(), reg.create()] == [0, 1]
    with pytest.raises(EnvCapacityError, match="env cap reached: 2 of 2 envs are open") as full:
        reg.create()
    assert full.value.details.pop("longest_idle_s") < 0.2
    assert full.value.details == {"open": 2, "max_envs": 2, "idle_envs": 2, "evict_idle_s": 0.2, "retry_after_s": 1}
    assert full.value.headers == {"Retry-After": "1"}
    time.sleep(0.25)
    with reg.use(0) as kept:  # env 0 was just used: env 1 is now the one idle longest
        pass
    assert reg.create() == 2 and reg.ids() == [0, 2] and reg.reaped == 1 and not kept.closed
    with pytest.raises(
        EnvExpiredError,
        match=r"^id 1 was closed after 0 s idle to make room for a new env at the cap of 2 \(--evict-idle-s 0.2\); "
        r"create a new env with POST /create$",
    ):
        with reg.use(1):
            pass
    with pytest.raises(EnvCapacityError) as full:  # env 2 is fresh and env 0 was just used: nobody may go
        reg.create()
    assert full.value.details["idle_envs"] == 2 and full.value.headers == {"Retry-After": "1"}


def test_a_full_registry_without_eviction_or_idle_timeout_cannot_say_when() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=1, id_name="id")
    reg.create()
    time.sleep(0.05)
    with pytest.raises(EnvCapacityError) as full:
        reg.create()
    assert full.value.details["retry_after_s"] == 5 and full.value.headers == {"Retry-After": "5"}
    with pytest.raises(ValueError, match=r"evict_idle_s must be >= 0 \(0: never\), got -1"):
        EnvRegistry(Dummy, max_envs=1, evict_idle_s=-1)


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
    app = create_app("test", EnvRegistry(Dummy, max_envs=1, id_name="id"), "B")
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


def test_the_family_is_a_spec_family() -> None:
    with pytest.raises(ValueError, match="family must be 'A' or 'B', got 'b'"):
        create_app("test", EnvRegistry(Dummy, max_envs=1), "b")  # type: ignore[arg-type]


def test_unexpected_errors_are_500_without_traceback() -> None:
    def broken() -> Dummy:
        raise RuntimeError("secret internals")

    app = create_app("test", EnvRegistry(broken, max_envs=1), "A")
    r = TestClient(app, raise_server_exceptions=False).post("/create")
    assert (r.status_code, r.json()) == (500, {"error": "internal server error (RuntimeError); see the server log"})
    assert "secret" not in r.text and "Traceback" not in r.text


def test_a_create_at_the_cap_reaps_expired_envs_first() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=2, id_name="id", idle_timeout_s=0.2)
    assert [reg.create(), reg.create()] == [0, 1]
    with reg.use(0) as first:
        pass
    with pytest.raises(EnvCapacityError, match="env cap reached: 2 of 2 envs are open"):
        reg.create()  # nothing has been idle long enough yet
    time.sleep(0.25)
    assert reg.create() == 2
    assert first.closed and reg.ids() == [2] and reg.reaped == 2
    expired = "id {} expired after 0.2 s idle and was closed; create a new env with POST /create"
    with pytest.raises(EnvExpiredError, match=expired.format(0)):
        with reg.use(0):
            pass
    with pytest.raises(EnvExpiredError, match=expired.format(1)):
        reg.close(1)
    with pytest.raises(UnknownEnvError, match="unknown id 9: create one with POST /create"):
        reg.close(9)


def test_an_env_in_use_or_used_lately_does_not_expire() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=4, idle_timeout_s=0.2)
    busy, lately = reg.create(), reg.create()
    inside, leave = threading.Event(), threading.Event()

    def long_call() -> None:
        with reg.use(busy):
            inside.set()
            leave.wait()

    t = threading.Thread(target=long_call)
    t.start()
    inside.wait()
    for _ in range(3):  # 0.3 s: each call to `lately` restarts its clock
        time.sleep(0.1)
        with reg.use(lately):
            pass
    assert reg.reap_expired() == 0
    health = reg.health()
    assert (health["in_flight"], health["oldest_request_s"] >= 0.3) == (1, True)
    leave.set()
    t.join()
    time.sleep(0.25)
    assert reg.reap_expired() == 2 and len(reg) == 0
    assert reg.health() == {
        "open": 0,
        "max_envs": 4,
        "reaped": 2,
        "idle_timeout_s": 0.2,
        "in_flight": 0,
        "oldest_request_s": 0.0,
    }


def test_a_request_past_the_timeout_finds_its_env_expired_before_any_sweep() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=4, id_name="env_idx", idle_timeout_s=0.1)
    env_id = reg.create()
    with reg.use(env_id) as env:
        pass
    time.sleep(0.15)
    with pytest.raises(EnvExpiredError, match="env_idx 0 expired after 0.1 s idle"):
        with reg.use(env_id):
            pass
    assert env.closed and reg.reaped == 1


def test_no_idle_timeout_means_envs_live_until_closed() -> None:
    reg: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=1)
    reg.create()
    time.sleep(0.05)
    assert reg.reap_expired() == 0
    with pytest.raises(ValueError, match=r"idle_timeout_s must be >= 0 \(0: never\), got -1"):
        EnvRegistry(Dummy, max_envs=1, idle_timeout_s=-1)


def test_health_route_sweep_and_410_over_http() -> None:
    registry: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=2, id_name="id", idle_timeout_s=0.2)
    with TestClient(create_app("test", registry, "B")) as client:  # the lifespan runs the sweep
        assert client.get("/").json() == "ok"
        assert client.get("/health").json() == {
            "open": 0,
            "max_envs": 2,
            "reaped": 0,
            "idle_timeout_s": 0.2,
            "in_flight": 0,
            "oldest_request_s": 0.0,
        }
        assert client.post("/create").json() == {"id": 0}
        assert registry.sweep_period_s == 0.1
        wait_until(lambda: client.get("/health").json()["reaped"] > 0, "the idle env's reaping", 5)
        assert client.get("/health").json() == {
            "open": 0,
            "max_envs": 2,
            "reaped": 1,
            "idle_timeout_s": 0.2,
            "in_flight": 0,
            "oldest_request_s": 0.0,
        }
        r = client.post("/close", json={"id": 0})
        assert (r.status_code, r.json()) == (
            410,
            {"error": "id 0 expired after 0.2 s idle and was closed; create a new env with POST /create"},
        )
        assert client.get("/list_envs").json() == []


def test_the_fault_injection_route_exists_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = TestClient(create_app("test", EnvRegistry(Dummy, max_envs=1), "A"))
    assert (plain.post("/debug/hang").status_code, plain.post("/debug/hang").json()) == (404, {"error": "Not Found"})
    monkeypatch.setenv(FAULT_INJECTION_ENV, "1")
    registry: EnvRegistry[Dummy] = EnvRegistry(Dummy, max_envs=1)
    faulty = TestClient(create_app("test", registry, "A"))
    assert faulty.post("/debug/hang").json() is True


def test_lmrlgym_health_sums_its_two_games_and_sweeps_both() -> None:
    from agentgym.lmrlgym.app import build_app

    with TestClient(build_app(max_envs=2, idle_timeout_s=0.2)) as client:
        assert client.get("/").json() == "ok"
        assert client.post("/maze/create").json() == {"id": 0}
        assert client.post("/wordle/create").json() == {"id": 0}
        game = {"open": 1, "max_envs": 2, "reaped": 0, "idle_timeout_s": 0.2, "in_flight": 0, "oldest_request_s": 0.0}
        assert client.get("/health").json() == {
            "open": 2,
            "max_envs": 4,
            "reaped": 0,
            "in_flight": 0,
            "idle_timeout_s": 0.2,
            "oldest_request_s": 0.0,
            "games": {"maze": game, "wordle": game},
        }
        wait_until(lambda: client.get("/health").json()["reaped"] >= 2, "both idle envs reaped", 5)
        assert client.get("/health").json()["reaped"] == 2
        r = client.post("/wordle/step", json={"id": 0, "action": "s h i r e"})
        assert (r.status_code, r.json()) == (
            410,
            {"error": "id 0 expired after 0.2 s idle and was closed; create a new env with POST /create"},
        )
