"""`ServerSupervisor`: the env servers a training run starts, owns and keeps alive.

    supervisor = ServerSupervisor("webshop", [36001, 36002], log_dir=Path("outputs/run/env_logs")).start()
    problem = supervisor.wait_ready(timeout_s=300)   # None once every server answers; else why one never will
    supervisor.close()

`SupervisorGroup` holds one supervisor per env of a mixed-env run.

Contract:

* `start` launches every server and waits until each answers ``GET /`` with
  ``"ok"`` (`RuntimeError` naming env, port and the log's tail otherwise), then
  a monitor thread checks each server every ``poll_s`` seconds.
* The monitor asks each server ``GET /health`` (`agentgym.server`): the
  server answers it on its event loop, with ``oldest_request_s``, the age of
  its oldest env call still running. A server whose process exited, that has
  not answered for ``hang_s`` seconds (a hung server: it accepts connections,
  answers nothing), or whose oldest env call has run for ``stuck_request_s`` seconds
  while it answers (a hung env route: a stuck JVM, a deadlocked planner) is
  killed and restarted; one log line names the env, the port and the exit code
  (or the hang). Its episodes fail on their own (their env calls error); the
  client pool rejoins the server once it is back. The other servers keep
  serving meanwhile.
* A server is restarted on its port, unless another process holds that port
  then: it is restarted on a free port instead, logged (``... the port is taken
  by another process; restarting on port Q (the agent now uses URL)``), and the
  move is recorded in ``addresses`` (`ServerAddresses`, by default the process's
  `ADDRESSES`), from which the agent's client pools take the new URL. The
  configured ports must still be free when the run starts.
* Restart attempt ``i`` (1-based) waits ``backoff_s * 2**(i-1)`` seconds first.
  An attempt whose server does not answer within ``start_timeout_s`` (or exits)
  fails; a server that comes back resets its count. After ``max_restarts``
  failed attempts in a row the server is given up (logged); once every server
  of the env is given up, `problem` names them, and a trainer stops there (with
  a checkpoint) rather than train on failed episodes.
* Servers are started with die-with-parent, so a SIGKILLed trainer leaves no
  server behind; `close` stops them all.
* ``host`` / ``advertise``: the address the servers bind and the one their URLs
  name (`ServerProcess`); a supervisor on another Ray node binds every interface
  and advertises the node's IP (`openmanus_rl.envs.server_host`).
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from agentgym.spawn import ServerProcess, free_port, healthy
from verl.utils.memory import current_rss_gb

from .addresses import ADDRESSES, ServerAddresses
from .remote import ServerWatch

HEALTH_TIMEOUT_S = 2.0


def _say(message: str) -> None:
    print(f"[env-supervisor] {message}", flush=True)


def server_health(url: str) -> dict[str, Any] | None:
    """The server's ``GET /health`` answer, or None when it gives none (no connection, timeout, not JSON)."""
    try:
        answer = requests.get(url.rstrip("/") + "/health", timeout=HEALTH_TIMEOUT_S).json()
    except (requests.RequestException, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def env_cap(url: str, default: int) -> int:
    """How many envs the server holds at once (``GET /health``'s ``max_envs``; ``default`` when it does not say):
    more episodes at once than that wait at its cap (503) and fail after the request timeout."""
    cap = (server_health(url) or {}).get("max_envs")
    return cap if isinstance(cap, int) and cap > 0 else default


def _serves(url: str, waited_s: float) -> bool:
    """Whether the server at ``url`` answers its health check with no env call older than ``waited_s``."""
    health = server_health(url)
    return health is not None and float(health.get("oldest_request_s", 0.0)) <= waited_s


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could bind ``port`` on ``host`` now (as uvicorn does, with SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class _Server:
    process: ServerProcess
    home: str  # the URL it was configured at: the agent's pools know it by this
    state: str = "up"  # up | backoff | starting | given_up
    attempts: int = 0  # failed restarts in a row
    restarts: int = 0  # successful restarts, ever
    silent_since: float | None = None  # first failed health check of the current silence
    next_at: float = 0.0  # backoff: when to launch; starting: the deadline
    last_exit: str = ""


class ServerSupervisor:
    def __init__(
        self,
        env: str,
        ports: list[int],
        log_dir: Path,
        max_restarts: int = 3,
        backoff_s: float = 1.0,
        hang_s: float = 30.0,
        poll_s: float = 1.0,
        start_timeout_s: float = 120.0,
        addresses: ServerAddresses = ADDRESSES,
        stuck_request_s: float | None = None,
        host: str = "127.0.0.1",
        advertise: str | None = None,
    ) -> None:
        """``stuck_request_s``: how old the oldest in-flight env call may get before the server counts as hung
        (default ``hang_s``; the trainer passes at least the agent's request timeout, so a call queued behind
        slow ones, e.g. ALFWorld's one-at-a-time game loading, is not mistaken for a hang before the agent
        itself would give up on it)."""
        stuck_request_s = hang_s if stuck_request_s is None else stuck_request_s
        if (
            max_restarts < 0
            or backoff_s < 0
            or hang_s <= 0
            or poll_s <= 0
            or start_timeout_s <= 0
            or stuck_request_s <= 0
        ):
            raise ValueError(
                "max_restarts and backoff_s must be >= 0; hang_s, poll_s, start_timeout_s and stuck_request_s > 0"
            )
        self.env, self.max_restarts, self.backoff_s = env, max_restarts, backoff_s
        self.hang_s, self.poll_s, self.start_timeout_s = hang_s, poll_s, start_timeout_s
        self.stuck_request_s = stuck_request_s
        self.log_dir, self.addresses = log_dir, addresses
        self.host, self.advertise = host, advertise
        log_dir.mkdir(parents=True, exist_ok=True)
        self._servers = [_Server(process, str(process.url)) for process in map(self._process, ports)]
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "ServerSupervisor":
        try:
            for server in self._servers:
                if port_free(server.process.port, self.host):
                    server.process.start()
                else:
                    self._move(server, wait=True)
                _say(f"{self.env} server on port {server.process.port} started (pid {server.process.pid})")
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._monitor, name=f"{self.env}-supervisor", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for server in self._servers:
            server.process.stop()
            self.addresses.forget(server.home)

    def _process(self, port: int) -> ServerProcess:
        return ServerProcess(
            self.env,
            port,
            log_path=self.log_dir / f"server_{port}.log",
            timeout_s=self.start_timeout_s,
            die_with_parent=True,
            host=self.host,
            advertise=self.advertise,
        )

    # ------------------------------------------------------------------ queries
    def homes(self) -> list[str]:
        """Each server's URL as started (``http://<advertise or host>:<port>``), in port order."""
        return [server.home for server in self._servers]

    def pids(self) -> list[int]:
        """Each server's current process id, in port order."""
        with self._lock:
            return [server.process.pid for server in self._servers]

    def problem(self) -> str | None:
        """Why the env cannot serve again (every server given up), or None while any server is or may come back."""
        with self._lock:
            lost = [s for s in self._servers if s.state == "given_up"]
        if len(lost) < len(self._servers):
            return None
        return "; ".join(
            f"{self.env} server on port {s.process.port} is down and could not be restarted ({s.last_exit}); "
            f"its log {s.process.log} ends:\n{s.process.log_tail(15)}"
            for s in lost
        )

    def wait_ready(self, timeout_s: float) -> str | None:
        """Block until some server can serve (None), every server is given up (`problem`), or ``timeout_s``
        passes. A server can serve once it answers ``GET /health`` with no env call still running from before
        the wait began (a call the last rollout left hanging there, say). A silent server, or one whose env
        call hangs, is left to the monitor, which restarts it after ``hang_s``; while one restarts, the others
        serve."""
        began = time.monotonic()
        while True:
            if (problem := self.problem()) is not None:
                return problem
            with self._lock:
                up = [s.process.url for s in self._servers if s.state == "up"]
            if any(_serves(url, waited_s=time.monotonic() - began) for url in up):
                return None
            if time.monotonic() - began >= timeout_s:
                return (
                    f"no {self.env} server could serve within {timeout_s:g} s (none answered its health check "
                    "without an env call hanging from before)"
                )
            with self._changed:
                self._changed.wait(self.poll_s)

    def metrics(self) -> dict[str, float]:
        """``env_server/restarts`` so far, ``env_server/down`` (servers not up now) and
        ``memory/env_servers_rss_gb`` (current, all servers together)."""
        with self._lock:
            pids = [s.process.pid for s in self._servers if s.process.exit_code() is None]
            restarts = sum(s.restarts for s in self._servers)
            down = sum(s.state != "up" for s in self._servers)
        return {
            "env_server/restarts": float(restarts),
            "env_server/down": float(down),
            "memory/env_servers_rss_gb": sum(current_rss_gb(p) for p in pids),
        }

    # ------------------------------------------------------------------ the monitor
    def _monitor(self) -> None:
        while not self._stop.wait(self.poll_s):
            for server in self._servers:
                self._check(server)

    def _check(self, server: _Server) -> None:
        proc, now = server.process, time.monotonic()
        if server.state == "up":
            code = proc.exit_code()
            health = server_health(proc.url) if code is None else None
            if code is not None:
                self._lost(server, f"exited with code {code}")
            elif health is not None:
                server.silent_since = None
                stuck_s = float(health.get("oldest_request_s", 0.0))
                if stuck_s >= self.stuck_request_s:
                    proc.kill()
                    self._lost(
                        server,
                        f"has had an env request in flight for {stuck_s:.0f} s while its health check "
                        "answered (an env route hung); killed it",
                    )
            elif server.silent_since is None:
                server.silent_since = now
            elif now - server.silent_since >= self.hang_s:
                proc.kill()
                self._lost(
                    server, f"did not answer its health check for {now - server.silent_since:.0f} s (hung); killed it"
                )
        elif server.state == "backoff" and now >= server.next_at:
            if port_free(proc.port, self.host):
                proc.launch()
            else:
                self._move(server)
            self._set(server, "starting", next_at=now + self.start_timeout_s)
        elif server.state == "starting":
            code = proc.exit_code()
            if code is None and healthy(proc.url):
                server.attempts, server.restarts, server.silent_since = 0, server.restarts + 1, None
                self._set(server, "up")
                _say(f"{self.env} server on port {proc.port} is back (pid {proc.pid}, restart {server.restarts})")
            elif code is not None or now >= server.next_at:
                proc.kill()
                self._lost(
                    server,
                    f"restart attempt {server.attempts + 1} failed: "
                    + (
                        f"exited with code {code}"
                        if code is not None
                        else f"not healthy within {self.start_timeout_s:.0f} s"
                    ),
                    failed_attempt=True,
                )

    def _lost(self, server: _Server, why: str, failed_attempt: bool = False) -> None:
        server.last_exit = why
        server.attempts += failed_attempt
        port = server.process.port
        if server.attempts >= self.max_restarts:
            self._set(server, "given_up")
            _say(f"{self.env} server on port {port} {why}; giving up after {server.attempts} failed restart(s)")
            return
        delay = self.backoff_s * 2**server.attempts
        self._set(server, "backoff", next_at=time.monotonic() + delay)
        _say(
            f"{self.env} server on port {port} {why}; restarting in {delay:.1f} s "
            f"(attempt {server.attempts + 1} of {self.max_restarts})"
        )

    def _move(self, server: _Server, wait: bool = False) -> None:
        """Another process holds the server's port: launch it on a free port (``wait``: until it answers, as at
        start) and tell the agent (``addresses``)."""
        taken = server.process.port
        process = self._process(free_port())
        process.start() if wait else process.launch()
        with self._lock:
            server.process = process
        self.addresses.move(server.home, process.url)
        _say(
            f"{self.env} server on port {taken}: the port is taken by another process; "
            f"{'starting' if wait else 'restarting'} on port {process.port} (the agent now uses {process.url})"
        )

    def _set(self, server: _Server, state: str, next_at: float = 0.0) -> None:
        with self._changed:
            server.state, server.next_at = state, next_at
            self._changed.notify_all()


class SupervisorGroup:
    """The supervisors of several envs (a mixed-env run) as one: started, waited on and closed together.

    ``wait_ready`` needs every env served (a row of an env without a server could only fail); ``metrics`` add up
    over the envs. ``watch`` (`ServerWatch`) covers the envs with servers listed in ``agent.env_servers``: such an
    env waits on all its servers through it (it is gone only when none answers), while its supervisor, if
    any, still restarts the local ones.
    """

    def __init__(self, supervisors: list[ServerSupervisor], watch: ServerWatch | None = None) -> None:
        self.supervisors = supervisors
        self.watch = watch

    def start(self) -> "SupervisorGroup":
        started: list[ServerSupervisor] = []
        try:
            for supervisor in self.supervisors:
                started.append(supervisor.start())
        except BaseException:
            for supervisor in started:
                supervisor.close()
            raise
        return self

    def close(self) -> None:
        for supervisor in self.supervisors:
            supervisor.close()

    def wait_ready(self, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        watched = self.watch.urls if self.watch is not None else {}
        for supervisor in self.supervisors:
            if supervisor.env in watched:
                continue  # the watch waits on all of that env's servers
            problem = supervisor.wait_ready(max(0.0, deadline - time.monotonic()))
            if problem is not None:
                return problem
        return self.watch.wait_ready(max(0.0, deadline - time.monotonic())) if self.watch is not None else None

    def metrics(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for supervisor in self.supervisors:
            for key, value in supervisor.metrics().items():
                total[key] = total.get(key, 0.0) + value
        return total
