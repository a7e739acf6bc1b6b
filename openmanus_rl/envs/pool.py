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
* Full servers: a server at its env cap (``/create`` answers 503) is waited for
  (`EnvClient.create`); one still full after that is skipped for this episode
  without a cooldown (it is healthy).
* Moved servers: before each lease the pool looks each server up in
  ``addresses`` (`ServerAddresses`, by default the process's `ADDRESSES`, where
  the supervisor records a server it restarted on another port). A moved
  server is used at its new URL from then on (logged); its idle clients and
  the clients still leased at the old URL are dropped without a ``/close``
  (the env died with the old server, and another process holds the old port).
  ``urls``, `leased` and `idle` give the current URLs.
* `close()` closes every idle client; clients released after it are closed too.
* ``stats``: counts of envs ``created``, ``reused``, ``discarded``, ``stale``
  (reused env that could not be reset, replaced), ``expired`` (reused env the
  server had closed for idleness, answering 410: replaced, not an error) and
  ``errors`` (failed calls seen while starting episodes, recovered or not).

Thread-safe: many threads may acquire, release and discard at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from agentgym.spawn import healthy

from .addresses import ADDRESSES, ServerAddresses
from .client import EnvClient
from .errors import EnvCapacityError, EnvClientError, EnvUnavailableError, NoEnvServerError
from .http import RetryPolicy
from .specs import EnvSpec

log = logging.getLogger(__name__)


def check_servers(base_url: str, ports: list[int], addresses: ServerAddresses = ADDRESSES) -> None:
    """Raise `ConnectionError` naming the first server that fails its health check (``GET /`` answers ``"ok"``),
    each asked where ``addresses`` says it answers now."""
    for port in ports:
        url = addresses.resolve(f"{base_url.rstrip('/')}:{port}") + "/"
        if not healthy(url):
            raise ConnectionError(
                f'environment server {url} is not answering GET / with "ok"; '
                f"start it with `agentgym serve <env> --port {port}` (train_ppo.sh does this for you)"
            )


class EnvPool:
    def __init__(
        self,
        spec: EnvSpec,
        urls: list[str],
        policy: RetryPolicy,
        cooldown_s: float = 30.0,
        addresses: ServerAddresses = ADDRESSES,
    ) -> None:
        """``urls``: the env's servers (``http://host:port``), local or on any host, all treated alike."""
        if not urls:
            raise ValueError(f"env {spec.name!r}: no server URLs given")
        self.spec = spec
        self.policy = policy
        self.cooldown_s = cooldown_s
        self.addresses = addresses
        self._homes = [url.rstrip("/") for url in urls]  # configured URLs, one per server
        self.urls = list(self._homes)  # where each server answers now
        self._server_of = {url: i for i, url in enumerate(self.urls)}  # every URL a server had -> its index
        self._idle: list[list[EnvClient]] = [[] for _ in self.urls]
        self._leased = [0] * len(self.urls)
        self._down_until = [0.0] * len(self.urls)
        self._lock = threading.Lock()
        self._closed = False
        self.stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ choice
    def _follow_moves(self) -> list[EnvClient]:
        """Take each server's current URL from ``addresses`` (lock held); the idle clients of moved servers,
        for the caller to drop without a ``/close``."""
        dropped: list[EnvClient] = []
        for i, home in enumerate(self._homes):
            current = self.addresses.resolve(home)
            if current != self.urls[i]:
                log.warning("env server %s moved to %s; new envs go there", self.urls[i], current)
                self.urls[i], self._server_of[current], self._down_until[i] = current, i, 0.0
                dropped += self._idle[i]
                self._idle[i] = []
        return dropped

    def _choose(self, exclude: set[str]) -> str | None:
        """Lease a slot on the least-loaded reachable server not in ``exclude`` (None if there is none)."""
        with self._lock:
            dropped = self._follow_moves()
            now = time.monotonic()
            candidates = [i for i, u in enumerate(self.urls) if u not in exclude]
            healthy = [i for i in candidates if self._down_until[i] <= now]
            pick = healthy or candidates
            if pick:
                chosen = min(pick, key=lambda i: (self._leased[i], i))
                self._leased[chosen] += 1
        for client in dropped:
            client.close(notify=False)
        return self.urls[chosen] if pick else None

    def _mark_down(self, url: str, error: EnvClientError) -> None:
        with self._lock:
            i = self._server_of[url]
            if url != self.urls[i]:
                return  # the failure was at an address the server has left
            self._down_until[i] = time.monotonic() + self.cooldown_s
            stale, self._idle[i] = self._idle[i], []
        for client in stale:
            client.close(notify=False)
        log.warning("env server %s unavailable for %.0fs: %s", url, self.cooldown_s, error)

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _unlease(self, url: str) -> None:
        with self._lock:
            self._leased[self._server_of[url]] -= 1

    # ------------------------------------------------------------------ leasing
    def _take(self, url: str) -> tuple[EnvClient, bool]:
        """An idle client of ``url`` (reused: True) or a newly created env (False)."""
        with self._lock:
            idle = self._idle[self._server_of[url]]
            if idle:
                self.stats["reused"] += 1  # under the lock
                return idle.pop(), True
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
            except EnvCapacityError as exc:  # healthy but full for as long as create() waited: try another server
                self._count("errors")
                tried.add(url)
                errors.append(str(exc))
                self._unlease(url)
            except EnvUnavailableError as exc:
                self._count("errors")
                tried.add(url)
                errors.append(str(exc))
                self._mark_down(url, exc)
                if client is not None:
                    client.close(notify=False)
                self._unlease(url)
            except EnvClientError as exc:
                expired = reused and exc.status == 410  # the server closed this idle env (its --idle-timeout-s)
                self._count("expired" if expired else "errors")
                self._unlease(url)
                if client is not None:
                    client.close(notify=not expired)
                if not reused:
                    raise
                if not expired:
                    self._count("stale")  # e.g. the server restarted and forgot this env: make a new one
            except BaseException:
                self._unlease(url)
                if client is not None:
                    client.close()
                raise
        raise NoEnvServerError(f"no {self.spec.name} server could start an episode: " + "; ".join(errors))

    def release(self, client: EnvClient) -> None:
        """Give back a healthy client for reuse (dropped without a ``/close`` if its server has moved)."""
        with self._lock:
            dropped = self._follow_moves()
            i = self._server_of[client.server_url]
            self._leased[i] -= 1
            moved = client.server_url != self.urls[i]
            keep = not self._closed and not moved
            if keep:
                self._idle[i].append(client)
        for stale in dropped:
            stale.close(notify=False)
        if not keep:
            client.close(notify=not moved)

    def discard(self, client: EnvClient, error: EnvClientError) -> None:
        """Give back a client whose call failed: close it; put its server on cooldown if it is unavailable."""
        self._count("discarded")
        unavailable = isinstance(error, EnvUnavailableError)
        if unavailable:
            self._mark_down(client.server_url, error)
        self._unlease(client.server_url)
        with self._lock:
            moved = client.server_url != self.urls[self._server_of[client.server_url]]
        client.close(notify=not (unavailable or moved))

    def close(self) -> None:
        """Close every idle client (``POST /close``)."""
        with self._lock:
            self._closed = True
            for client in self._follow_moves():
                client.close(notify=False)
            idle = [c for clients in self._idle for c in clients]
            for clients in self._idle:
                clients.clear()
        for client in idle:
            client.close()

    def leased(self) -> dict[str, int]:
        """Clients leased now, by the current URL of each server."""
        with self._lock:
            return dict(zip(self.urls, self._leased))

    def idle(self) -> dict[str, int]:
        """Idle clients kept for reuse, by the current URL of each server."""
        with self._lock:
            return {u: len(clients) for u, clients in zip(self.urls, self._idle)}
