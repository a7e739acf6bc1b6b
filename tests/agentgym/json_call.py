"""`call`: one HTTP request to an env server that must answer JSON with the expected status; the answer, parsed."""

from __future__ import annotations

from typing import Any

import requests


def call(
    url: str, method: str, path: str, body: Any = None, params: Any = None, status: int = 200, timeout_s: float = 10.0
) -> Any:
    r = requests.request(method, url + path, json=body, params=params, timeout=timeout_s)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    return r.json()
