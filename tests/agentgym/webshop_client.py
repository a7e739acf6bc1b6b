"""A minimal upstream-style WebShop (family A) client for the tests."""

from __future__ import annotations

from typing import Any

import requests


class Client:
    """An upstream-style family-A client: JSON POSTs, ``env_idx`` query GETs."""

    def __init__(self, url: str, env_idx: int | None = None, http: requests.Session | None = None) -> None:
        self.url = url
        self.http = http or requests.Session()
        self.env_idx: int = self.http.post(url + "/create", timeout=10).json() if env_idx is None else env_idx

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


def shop_for(client: Client, goal: Any, product: Any) -> dict[str, Any]:
    """The oracle episode for ``goal``: find its product by title, select its options, buy.

    Checks on the way that every page shows this goal's instruction (no cross-talk between envs)
    and that no step before the purchase pays.
    """
    start = client.reset(goal.session_id)
    assert start == f"WebShop [SEP] Instruction: [SEP] {goal.instruction} [SEP] Search"
    steps = [client.step(f"search[{product.title}]")]
    while product.asin.lower() not in client.clickables():
        assert "next >" in client.clickables(), f"{product.asin} not found by its title"
        steps.append(client.step("click[next >]"))
    steps.append(client.step(f"click[{product.asin}]"))
    steps += [client.step(f"click[{option}]") for option in goal.options]
    for s in steps:
        assert (s["reward"], s["done"], s["info"]) == (0.0, False, None)
        assert s["state"].startswith(f"Instruction: [SEP] {goal.instruction} [SEP] ")
    final = client.step("click[buy now]")
    assert final["info"]["goal_asin"] == goal.asin
    return final
