"""The launcher and console commands, start-up time, and what agentgym imports."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import requests
from webshop_client import Client

BIN = Path(sys.executable).parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=True)


def test_agentgym_does_not_import_the_trainer_or_torch() -> None:
    out = run(
        "-c",
        "import sys, agentgym.launcher, agentgym.webshop.app, agentgym.webshop.data; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'transformers', 'verl', 'openmanus_rl'}))",
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_cli_lists_envs_and_options() -> None:
    assert run("-m", "agentgym.launcher", "list").stdout == (
        "alfworld\nbabyai\nfrozenlake\nmaze\nsciworld\nsokoban\ntextcraft\nwebshop\nwordle\n"
    )
    usage = run("-m", "agentgym.launcher", "serve", "webshop", "--help").stdout
    for option in ("--host", "--port", "--data-dir", "--goals", "--max-envs", "--show-attrs", "--log-level"):
        assert option in usage


@pytest.mark.slow
def test_webshop_console_command_serves_an_upstream_client(start_server: Callable[..., Any], shop: Any) -> None:
    script = BIN / "webshop"
    assert script.is_file(), "the `webshop` console script is installed by pyproject.toml"
    began = time.monotonic()
    with start_server("--host", "127.0.0.1", command=[str(script)]) as url:
        started = time.monotonic() - began
        assert started < 20, f"warm start took {started:.1f}s"
        assert requests.get(url + "/", timeout=5).json() == "ok"
        c = Client(url)
        goal = shop.goal(7)
        obs = c.reset(7)
        assert obs == f"WebShop [SEP] Instruction: [SEP] {goal.instruction} [SEP] Search"
        c.step(f"search[{goal.instruction}]")
        first = next(x for x in c.clickables() if x not in ("back to search", "next >"))
        assert c.step(f"click[{first}]")["state"].endswith("Buy Now")
        r = c.step("click[buy now]")
        assert r["done"] is True and 0.0 <= r["reward"] <= 1.0 and set(r) == {"state", "reward", "done", "info"}
        bad = requests.post(url + "/step", json={"env_idx": c.env_idx, "action": "click[buy now]"}, timeout=5)
        assert bad.status_code == 409 and "error" in bad.json()


@pytest.mark.slow
def test_attrs_option_reaches_the_server(start_server: Callable[..., Any], shop: Any) -> None:
    with start_server("--show-attrs", "--goals", "human") as url:
        c = Client(url)
        goal = shop.goal(0)
        c.reset(0)
        product = shop.by_asin[shop.goal(0).asin]
        c.step(f"search[{product.title}]")
        c.step(f"click[{product.asin}]")
        assert "attributes" in c.clickables()
        assert c.get("/instruction_text") != goal.instruction  # human goals are a different list
