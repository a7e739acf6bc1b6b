"""`ServerAddresses`: where each env server answers now, known by the URL it was configured at.

A supervised env server may come back on another port: when its own port is
taken by another process while it is down, the supervisor restarts it on a free
port (`openmanus_rl.envs.supervisor`). The supervisor records the move here and
every `EnvPool` reads it before it leases a server, so new envs go to the new
address from then on. The trainer builds the agent and runs the supervisor in
the driver process; `ADDRESSES` is that process's book, the default of both.
"""

from __future__ import annotations

import threading


class ServerAddresses:
    """Thread-safe map: configured server URL (``http://host:port``) -> the URL it answers at now."""

    def __init__(self) -> None:
        self._moved: dict[str, str] = {}
        self._lock = threading.Lock()

    def move(self, configured: str, current: str) -> None:
        """The server configured at ``configured`` answers at ``current`` from now on."""
        with self._lock:
            self._moved[configured.rstrip("/")] = current.rstrip("/")

    def resolve(self, configured: str) -> str:
        """Where the server configured at ``configured`` answers now (``configured`` itself unless it moved)."""
        configured = configured.rstrip("/")
        with self._lock:
            return self._moved.get(configured, configured)

    def forget(self, configured: str) -> None:
        """Drop the move of ``configured`` (its supervisor stopped it)."""
        with self._lock:
            self._moved.pop(configured.rstrip("/"), None)


ADDRESSES = ServerAddresses()
