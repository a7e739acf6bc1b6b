"""``env_server``: one server per env for the whole session, shared by the test modules that talk to it."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Callable, Iterator

import pytest

from agentgym.spawn import ServerUrl, serve_subprocess

START_TIMEOUT_S = 120.0


@pytest.fixture(scope="session")
def env_server() -> Iterator[Callable[[str], ServerUrl]]:
    """``env_server(name)``: the URL of the session's server of env ``name``, started through the launcher on first
    use and stopped when the session ends.  Ids on it do not start at 0: tests that need that start their own."""
    with ExitStack() as stack:
        urls: dict[str, ServerUrl] = {}

        def get(name: str) -> ServerUrl:
            if name not in urls:
                urls[name] = stack.enter_context(serve_subprocess(name, timeout_s=START_TIMEOUT_S))
            return urls[name]

        yield get
