"""`call`: one HTTP request to an env server that must answer JSON with the expected status; the answer, parsed.
`server_of(name)`: a test module's ``server`` fixture, the session's shared server of env ``name``."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import requests

from agentgym.spawn import ServerUrl


def call(
    url: str, method: str, path: str, body: Any = None, params: Any = None, status: int = 200, timeout_s: float = 10.0
) -> Any:
    r = requests.request(method, url + path, json=body, params=params, timeout=timeout_s)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    return r.json()


def server_of(name: str) -> Any:
    """``server = server_of("maze")`` in a test module: its module-scoped ``server`` fixture, the URL of the
    session's server of env ``name`` (the ``env_server`` fixture)."""

    @pytest.fixture(scope="module")
    def server(env_server: Callable[[str], ServerUrl]) -> ServerUrl:
        return env_server(name)

    return server
