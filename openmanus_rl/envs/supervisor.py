"""`ServerSupervisor`: the env servers a training run starts, owns and keeps alive.

    supervisor = ServerSupervisor("webshop", [36001, 36002], log_dir=Path("outputs/run/env_logs")).start()
    problem = supervisor.wait_ready(timeout_s=300)   # None once every server answers; else why one never will
    supervisor.close()

`SupervisorGroup` holds one supervisor per env of a mixed-env run.

Contract:

* `start` launches every server and waits until each answers ``GET /`` with
  ``"ok"`` (`RuntimeError` naming env, port and the log's tail otherwise), then
  a monitor thread checks each server every ``poll_s`` seconds.
* A server whose process exited, or that has not answered its health check for
  ``hang_s`` seconds (a hung server: it accepts connections, answers nothing),
  is killed and restarted on the same port; one log line names the env, the
  port and the exit code (or the hang). Its episodes fail on their own (their
  env calls error); the client pool rejoins the server once it is back. The
  other servers keep serving meanwhile.
* Restart attempt ``i`` (1-based) waits ``backoff_s * 2**(i-1)`` seconds first.
  An attempt whose server does not answer within ``start_timeout_s`` (or exits)
  fails; a server that comes back resets its count. After ``max_restarts``
  failed attempts in a row the server is given up (logged); once every server
  of the env is given up, `problem` names them, and a trainer stops there (with
  a checkpoint) rather than train on failed episodes.
* Servers are started with die-with-parent, so a SIGKILLed trainer leaves no
  server behind; `close` stops them all.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from agentgym.spawn import ServerProcess, healthy
from verl.utils.memory import current_rss_gb

def _say(message: str) -> None:
    print(f"[env-supervisor] {message}", flush=True)


@dataclass
class _Server:
    process: ServerProcess
    state: str = "up"  # up | backoff | starting | given_up
    attempts: int = 0  # failed restarts in a row
    restarts: int = 0  # successful restarts, ever
    silent_since: float | None = None  # first failed health check of the current silence
    next_at: float = 0.0  # backoff: when to launch; starting: the deadline
    last_exit: str = ""


class ServerSupervisor:
    def __init__(self, env: str, ports: list[int], log_dir: Path, max_restarts: int = 3, backoff_s: float = 1.0,
                 hang_s: float = 30.0, poll_s: float = 1.0, start_timeout_s: float = 120.0) -> None:
        if max_restarts < 0 or backoff_s < 0 or hang_s <= 0 or poll_s <= 0 or start_timeout_s <= 0:
            raise ValueError("max_restarts and backoff_s must be >= 0; hang_s, poll_s and start_timeout_s > 0")
        self.env, self.max_restarts, self.backoff_s = env, max_restarts, backoff_s
        self.hang_s, self.poll_s, self.start_timeout_s = hang_s, poll_s, start_timeout_s
        log_dir.mkdir(parents=True, exist_ok=True)
        self._servers = [
            _Server(ServerProcess(env, port, log_path=log_dir / f"server_{port}.log", timeout_s=start_timeout_s,
                                  die_with_parent=True))
            for port in ports
        ]
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "ServerSupervisor":
        try:
            for server in self._servers:
                server.process.start()
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

    # ------------------------------------------------------------------ queries
    def problem(self) -> str | None:
        """Why the env cannot serve again (every server given up), or None while any server is or may come back."""
        with self._lock:
            lost = [s for s in self._servers if s.state == "given_up"]
        if len(lost) < len(self._servers):
            return None
        return "; ".join(
            f"{self.env} server on port {s.process.port} is down and could not be restarted ({s.last_exit}); "
            f"its log {s.process.log} ends:\n{s.process.log_tail(15)}" for s in lost)

    def wait_ready(self, timeout_s: float) -> str | None:
        """Block until some server answers its health check now (None), every server is given up (`problem`),
        or ``timeout_s`` passes. A silent server is left to the monitor, which restarts it once it has been
        silent for ``hang_s``; while one restarts, the others serve."""
        deadline = time.monotonic() + timeout_s
        while True:
            if (problem := self.problem()) is not None:
                return problem
            with self._lock:
                up = [s.process.url for s in self._servers if s.state == "up"]
            if any(healthy(url) for url in up):
                return None
            if time.monotonic() >= deadline:
                return f"no {self.env} server answered its health check within {timeout_s:.0f} s"
            with self._changed:
                self._changed.wait(self.poll_s)

    def metrics(self) -> dict[str, float]:
        """``env_server/restarts`` so far, ``env_server/down`` (servers not up now) and
        ``memory/env_servers_rss_gb`` (current, all servers together)."""
        with self._lock:
            pids = [s.process.pid for s in self._servers if s.process.exit_code() is None]
            restarts = sum(s.restarts for s in self._servers)
            down = sum(s.state != "up" for s in self._servers)
        return {"env_server/restarts": float(restarts), "env_server/down": float(down),
                "memory/env_servers_rss_gb": sum(current_rss_gb(p) for p in pids)}

    # ------------------------------------------------------------------ the monitor
    def _monitor(self) -> None:
        while not self._stop.wait(self.poll_s):
            for server in self._servers:
                self._check(server)

    def _check(self, server: _Server) -> None:
        proc, now = server.process, time.monotonic()
        if server.state == "up":
            code = proc.exit_code()
            if code is not None:
                self._lost(server, f"exited with code {code}")
            elif healthy(proc.url):
                server.silent_since = None
            elif server.silent_since is None:
                server.silent_since = now
            elif now - server.silent_since >= self.hang_s:
                proc.kill()
                self._lost(server, f"did not answer its health check for {now - server.silent_since:.0f} s (hung); killed it")
        elif server.state == "backoff" and now >= server.next_at:
            proc.launch()
            self._set(server, "starting", next_at=now + self.start_timeout_s)
        elif server.state == "starting":
            code = proc.exit_code()
            if code is None and healthy(proc.url):
                server.attempts, server.restarts, server.silent_since = 0, server.restarts + 1, None
                self._set(server, "up")
                _say(f"{self.env} server on port {proc.port} is back (pid {proc.pid}, restart {server.restarts})")
            elif code is not None or now >= server.next_at:
                proc.kill()
                self._lost(server, f"restart attempt {server.attempts + 1} failed: "
                                   + (f"exited with code {code}" if code is not None else f"not healthy within {self.start_timeout_s:.0f} s"),
                           failed_attempt=True)

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
        _say(f"{self.env} server on port {port} {why}; restarting in {delay:.1f} s "
             f"(attempt {server.attempts + 1} of {self.max_restarts})")

    def _set(self, server: _Server, state: str, next_at: float = 0.0) -> None:
        with self._changed:
            server.state, server.next_at = state, next_at
            self._changed.notify_all()


class SupervisorGroup:
    """The supervisors of several envs (a mixed-env run) as one: started, waited on and closed together.

    ``wait_ready`` needs every env served (a row of an env without a server could only fail); ``metrics`` add up
    over the envs.
    """

    def __init__(self, supervisors: list[ServerSupervisor]) -> None:
        self.supervisors = supervisors

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
        for supervisor in self.supervisors:
            problem = supervisor.wait_ready(max(0.0, deadline - time.monotonic()))
            if problem is not None:
                return problem
        return None

    def metrics(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for supervisor in self.supervisors:
            for key, value in supervisor.metrics().items():
                total[key] = total.get(key, 0.0) + value
        return total
