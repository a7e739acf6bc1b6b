"""`EnvPool`: env clients of one env spread over several servers, reused between episodes.

* Load balancing: a new episode goes to the reachable server with the fewest
  envs currently leased (ties go to the server listed first).
* Reuse: a released client stays open and is reset for a later episode; the
  pool creates envs only when no idle one is left on the chosen server, so a
  server holds at most as many envs as episodes ran on it at once.
* Failures: a client whose call failed is discarded.  If the failure says the
  server is unavailable (connection, timeout, 5xx), the server is skipped for
  ``cooldown_s`` seconds and its idle clients are dropped without a
  ``/close`` (the server cannot answer it); after the cooldown it is tried
  again, so a restarted server rejoins.  Otherwise the client is closed.
  `start_episode` fails over while no step has been taken: a reused client
  that cannot be reset is replaced by a fresh env, and an unavailable server
  by another server.  A failure after that is the episode's.
* `close()` closes every idle client; clients released after it are closed too.
* ``stats``: counts of envs ``created``, ``reused``, ``discarded``, ``stale``
  (reused env that could not be reset, replaced) and ``errors`` (failed calls
  seen while starting episodes, recovered or not).

Thread-safe: many threads may acquire, release and discard at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from agentgym.spawn import healthy

from .client import EnvClient
from .errors import EnvClientError, EnvUnavailableError, NoEnvServerError
from .http import RetryPolicy
from .specs import EnvSpec

log = logging.getLogger(__name__)


def check_servers(base_url: str, ports: list[int]) -> None:
    """Raise `ConnectionError` naming the first server that fails its health check (``GET /`` answers ``"ok"``)."""
    for port in ports:
        url = f"{base_url}:{port}/"
        if not healthy(url):
            raise ConnectionError(
                f"environment server {url} is not answering GET / with \"ok\"; "
                f"start it with `agentgym serve <env> --port {port}` (train_ppo.sh does this for you)"
            )


class EnvPool:
    def __init__(self, spec: EnvSpec, base_url: str, ports: list[int], policy: RetryPolicy,
                 cooldown_s: float = 30.0) -> None:
        if not ports:
            raise ValueError(f"env {spec.name!r}: no server ports given")
        self.spec = spec
        self.policy = policy
        self.cooldown_s = cooldown_s
        self.urls = [f"{base_url.rstrip('/')}:{port}" for port in ports]
        self._idle: dict[str, list[EnvClient]] = {url: [] for url in self.urls}
        self._leased: Counter[str] = Counter()
        self._down_until: dict[str, float] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ choice
    def _choose(self, exclude: set[str]) -> str | None:
        """Lease a slot on the least-loaded reachable server not in ``exclude`` (None if there is none)."""
        with self._lock:
            now = time.monotonic()
            candidates = [u for u in self.urls if u not in exclude]
            healthy = [u for u in candidates if self._down_until.get(u, 0.0) <= now]
            pick = healthy or candidates
            if not pick:
                return None
            url = min(pick, key=lambda u: (self._leased[u], self.urls.index(u)))
            self._leased[url] += 1
            return url

    def _mark_down(self, url: str, error: EnvClientError) -> None:
        with self._lock:
            self._down_until[url] = time.monotonic() + self.cooldown_s
            stale, self._idle[url] = self._idle[url], []
        for client in stale:
            client.close(notify=False)
        log.warning("env server %s unavailable for %.0fs: %s", url, self.cooldown_s, error)

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _unlease(self, url: str) -> None:
        with self._lock:
            self._leased[url] -= 1

    # ------------------------------------------------------------------ leasing
    def _take(self, url: str) -> tuple[EnvClient, bool]:
        """An idle client of ``url`` (reused: True) or a newly created env (False)."""
        with self._lock:
            if self._idle[url]:
                self.stats["reused"] += 1  # under the lock
                return self._idle[url].pop(), True
        client = EnvClient(self.spec, url, self.policy)
        try:
            client.create()
        except BaseException:
            client.close(notify=False)
            raise
        self._count("created")
        return client, False

    def start_episode(self, task_id: int) -> tuple[EnvClient, str]:
        """A client reset to ``task_id`` and its first observation, failing over between servers.

        Raises `NoEnvServerError` when every server failed with an availability
        error, and any other `EnvClientError` (e.g. an unknown task id) as is.
        """
        tried: set[str] = set()
        errors: list[str] = []
        while (url := self._choose(tried)) is not None:
            client, reused = None, False
            try:
                client, reused = self._take(url)
                return client, client.reset(task_id)
            except EnvUnavailableError as exc:
                self._count("errors")
                tried.add(url)
                errors.append(str(exc))
                self._mark_down(url, exc)
                if client is not None:
                    client.close(notify=False)
                self._unlease(url)
            except EnvClientError:
                self._count("errors")
                self._unlease(url)
                if client is not None:
                    client.close()
                if not reused:
                    raise
                self._count("stale")  # e.g. the server restarted and forgot this env: make a new one
            except BaseException:
                self._unlease(url)
                if client is not None:
                    client.close()
                raise
        raise NoEnvServerError(f"no {self.spec.name} server could start an episode: " + "; ".join(errors))

    def release(self, client: EnvClient) -> None:
        """Give back a healthy client for reuse."""
        with self._lock:
            self._leased[client.server_url] -= 1
            if not self._closed:
                self._idle[client.server_url].append(client)
                return
        client.close()

    def discard(self, client: EnvClient, error: EnvClientError) -> None:
        """Give back a client whose call failed: close it; put its server on cooldown if it is unavailable."""
        self._count("discarded")
        unavailable = isinstance(error, EnvUnavailableError)
        if unavailable:
            self._mark_down(client.server_url, error)
        self._unlease(client.server_url)
        client.close(notify=not unavailable)

    def close(self) -> None:
        """Close every idle client (``POST /close``)."""
        with self._lock:
            self._closed = True
            idle = [c for clients in self._idle.values() for c in clients]
            for clients in self._idle.values():
                clients.clear()
        for client in idle:
            client.close()

    def leased(self) -> dict[str, int]:
        with self._lock:
            return {u: self._leased[u] for u in self.urls}

    def idle(self) -> dict[str, int]:
        with self._lock:
            return {u: len(self._idle[u]) for u in self.urls}
