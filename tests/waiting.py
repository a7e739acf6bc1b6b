"""Waiting in tests: one poll loop with a deadline, so that no test writes its own."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import pytest

T = TypeVar("T")


def wait_until(check: Callable[[], T], what: str, timeout_s: float = 60.0, poll_s: float = 0.05) -> T:
    """Call ``check`` every ``poll_s`` seconds until it returns something truthy, and return that; after
    ``timeout_s`` the test fails with "timed out after S s waiting for <what>"."""
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(poll_s)
    return found
