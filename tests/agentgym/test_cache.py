"""The cache root rule, the same in both packages that define it (`agentgym.cache`, `verl.utils.cache`):
``$OPENMANUS_CACHE`` when set to a non-empty value, else ``~/.cache/openmanus_rl``."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from agentgym.cache import cache_root as agentgym_cache_root
from verl.utils.cache import cache_root as verl_cache_root

HOME = "/home/tester"


@pytest.mark.parametrize("cache_root", [agentgym_cache_root, verl_cache_root], ids=["agentgym", "verl"])
@pytest.mark.parametrize(
    "value, expected",
    [
        ("/srv/openmanus", "/srv/openmanus"),
        ("relative/cache", "relative/cache"),
        ("", f"{HOME}/.cache/openmanus_rl"),
        (None, f"{HOME}/.cache/openmanus_rl"),
    ],
    ids=["set", "relative", "empty", "unset"],
)
def test_cache_root(
    cache_root: Callable[[], Path], value: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", HOME)
    if value is None:
        monkeypatch.delenv("OPENMANUS_CACHE", raising=False)
    else:
        monkeypatch.setenv("OPENMANUS_CACHE", value)
    assert cache_root() == Path(expected)
