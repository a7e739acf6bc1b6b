"""Env servers the run does not own (``agent.env_servers``): probed, waited on, never started or restarted.

* `probe(url)`: None when the server answers ``GET /`` with ``"ok"``, else a short reason
  (``Connection refused``, ``no answer within 2 s``, ``HTTP 503``, ``answered 'busy'``).
* `silent_servers(urls)`: the reasons of every URL that does not answer, probed in parallel.
* `ServerWatch`: the envs whose servers include listed ones, for the trainer (through `SupervisorGroup`):
  ``wait_ready`` returns None once each env has a server answering; when none of an env's servers
  answers for ``timeout_s`` it returns why: each URL with its last error. The trainer then checkpoints
  and stops with that message rather than train on failed episodes.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from .addresses import ADDRESSES, ServerAddresses

PROBE_TIMEOUT_S = 2.0


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the server at ``url`` answers ``GET /`` with ``"ok"``; else why not, in a few words."""
    try:
        response = requests.get(url.rstrip("/") + "/", timeout=timeout_s)
    except requests.Timeout:
        return f"no answer within {timeout_s:g} s"
    except requests.RequestException as exc:
        errno = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(exc))
        return errno.group(1).strip() if errno else type(exc).__name__
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        body = response.text
    return None if body == "ok" else f"answered {str(body)[:60]!r}"


def silent_servers(urls: list[str]) -> dict[str, str]:
    """URL -> why it does not answer, for each of ``urls`` that does not (in their order)."""
    if not urls:
        return {}
    with ThreadPoolExecutor(min(len(urls), 16)) as pool:
        reasons = list(pool.map(probe, urls))
    return {url: why for url, why in zip(urls, reasons) if why is not None}


class ServerWatch:
    """The servers of the envs that list servers of their own (``{env: [url, ...]}``, local ones included).

    Nothing is started, restarted or stopped here; a local URL is probed where the supervisor moved it
    (``addresses``).
    """

    def __init__(self, urls: dict[str, list[str]], addresses: ServerAddresses = ADDRESSES, poll_s: float = 1.0) -> None:
        self.urls = urls
        self.addresses = addresses
        self.poll_s = poll_s

    def wait_ready(self, timeout_s: float) -> str | None:
        """Block until every env has a server answering ``GET /`` (None), or name the first env none of whose
        servers answered for ``timeout_s`` seconds, with each URL's last error."""
        began = time.monotonic()
        waiting = list(self.urls)
        while True:
            silent = {env: silent_servers([self.addresses.resolve(url) for url in self.urls[env]]) for env in waiting}
            waiting = [env for env in waiting if len(silent[env]) == len(self.urls[env])]
            if not waiting:
                return None
            if time.monotonic() - began >= timeout_s:
                env = waiting[0]
                gone = "; ".join(f"{url} ({why})" for url, why in silent[env].items())
                return (
                    f'every {env} server is gone (none answered GET / with "ok" '
                    f"for {round(timeout_s, 1):g} s): {gone}. "
                    f"The run never starts or restarts the servers listed in agent.env_servers: bring one back, "
                    f"then re-run to resume"
                )
            time.sleep(self.poll_s)
