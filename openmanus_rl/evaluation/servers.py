"""The env servers an evaluation talks to: started for the run, or the URLs of running ones."""

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


def server_url_list(value: str) -> list[str]:
    """``--server_url``'s comma-separated servers as URLs ``scheme://host[:port]`` (``http://`` when no scheme is
    given, no trailing slash); a ValueError naming the first one that is not an http(s) URL with a host."""
    urls = [url.strip().rstrip("/") for url in value.split(",") if url.strip()]
    if not urls:
        raise ValueError(
            f"--server_url must name at least one server (http://HOST:PORT[,http://HOST:PORT...]), got {value!r}"
        )
    checked = []
    for url in urls:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
            raise ValueError(f"--server_url must list URLs like http://HOST:PORT, got {url!r}")
        checked.append(f"{parts.scheme}://{parts.netloc}")
    return checked
