"""A minimal upstream-style WebShop (family A) client for the tests."""

from __future__ import annotations

from typing import Any

import requests


class Client:
    """An upstream-style family-A client: JSON POSTs, ``env_idx`` query GETs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = requests.Session()
        self.env_idx: int = self.http.post(url + "/create", timeout=10).json()

    def post(self, path: str, **body: Any) -> Any:
        r = self.http.post(self.url + path, json={"env_idx": self.env_idx, **body}, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def get(self, path: str) -> Any:
        r = self.http.get(self.url + path, params={"env_idx": self.env_idx}, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def reset(self, session_id: int | None) -> str:
        obs, extra = self.post("/reset", session_id=session_id)
        assert extra is None
        return obs

    def step(self, action: str) -> dict[str, Any]:
        return self.post("/step", action=action)

    def clickables(self) -> list[str]:
        return self.get("/available_actions")["clickables"]

    def close(self) -> None:
        self.post("/close")
        self.http.close()
