"""The env server an evaluation talks to: one started for the run, or the URL of a running one."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator
from urllib.parse import urlsplit

from agentgym.spawn import serve_subprocess

SERVER_START_TIMEOUT_S = 180.0


@contextmanager
def env_server(env: str) -> Iterator[str]:
    """An env server process (``agentgym serve <env>``) on a free port; yields its URL once healthy."""
    with serve_subprocess(env, timeout_s=SERVER_START_TIMEOUT_S) as url:
        print(f"[eval] started a {env} server at {url}", flush=True)
        yield url


def split_server_url(url: str) -> tuple[str, int]:
    """``http://host:port`` -> (``http://host``, port), as `AgentConfig` takes them (default port from the scheme)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--server_url must look like http://HOST:PORT, got {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}", port
