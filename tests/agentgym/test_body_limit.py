"""Request bodies over the server's limit get 413 with a JSON error before any route runs; the server goes on."""

from __future__ import annotations

import pytest
import requests
from fastapi.testclient import TestClient

from agentgym.open_envs import EnvRegistry
from agentgym.server import create_app


@pytest.fixture()
def client() -> TestClient:
    registry: EnvRegistry[object] = EnvRegistry(object, max_envs=4, id_name="env_idx")
    return TestClient(create_app("Toy", registry, "A", max_body_bytes=64))


def test_a_body_within_the_limit_reaches_the_route(client: TestClient) -> None:
    assert client.post("/create").json() == 0
    body = b'{"env_idx": 0}' + b" " * 50  # 64 bytes: at the limit
    assert len(body) == 64
    r = client.post("/close", content=body, headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (200, True)


def test_a_declared_body_over_the_limit_is_413_and_nothing_runs(client: TestClient) -> None:
    assert client.post("/create").json() == 0
    body = b'{"env_idx": 0}' + b" " * 51  # 65 bytes
    r = client.post("/close", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"error": "request body of 65 bytes exceeds the limit of 64 bytes"}
    assert client.get("/list_envs").json() == [0]  # the close never ran


def test_a_streamed_body_over_the_limit_is_413(client: TestClient) -> None:
    def chunks():
        for _ in range(10):
            yield b"x" * 16

    r = client.post("/close", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json() == {"error": "request body exceeds the limit of 64 bytes"}
    assert client.get("/").json() == "ok"


@pytest.mark.slow
def test_the_webshop_server_refuses_a_2_mib_step_and_stays_up(server: str) -> None:
    r = requests.post(
        server + "/step", data=b"{" + b" " * (2 << 20) + b"}", headers={"content-type": "application/json"}, timeout=30
    )
    assert r.status_code == 413
    assert r.json() == {"error": f"request body of {(2 << 20) + 2} bytes exceeds the limit of 1048576 bytes"}
    assert requests.get(server + "/", timeout=10).json() == "ok"
