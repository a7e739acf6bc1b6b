"""Start environment servers as child processes and wait until they are healthy.

    with serve_subprocess("webshop") as url:      # http://127.0.0.1:<free port>
        ...

    server = ServerProcess("webshop").start()     # the same, with control: kill / pause / resume / stop

A server runs through the launcher (``python -m agentgym.launcher serve <env>``,
or any ``command`` that takes ``--port``), logs to a file, and must answer
``GET /`` with ``"ok"`` within ``timeout_s``; otherwise (or if it exits)
`RuntimeError` gives the log's tail. The one place that starts servers for the
eval and demonstration scripts, the benchmarks and the tests.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Sequence


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def healthy(url: str) -> bool:
    """Whether the server at ``url`` answers ``GET /`` with ``"ok"`` (its health check)."""
    import requests

    try:
        return requests.get(url.rstrip("/") + "/", timeout=2).json() == "ok"
    except (requests.RequestException, ValueError):
        return False


class ServerUrl(str):
    """A running server's base URL (``http://127.0.0.1:<port>``), with its ``port``,
    process ``pid`` and ``log`` path."""

    port: int
    pid: int
    log: Path


class ServerProcess:
    """One env server as a child process.

    ``args`` are extra launcher options; ``command`` replaces ``python -m agentgym.launcher serve <env>``
    (``--port`` is appended either way); ``environ`` is the child's environment (default: ours);
    ``log_path`` keeps its log there (default: a temporary file); ``die_with_parent`` (Linux) has the
    kernel SIGKILL the server when the thread that started it dies, so a killed trainer leaves no server behind.
    ``host`` is the address it binds (``--host``; 0.0.0.0: every interface) and ``advertise`` the one its URL
    names (default ``host``), e.g. the node's IP for a server other hosts reach.
    """

    def __init__(
        self,
        env: str,
        port: int | None = None,
        args: Sequence[str] = (),
        command: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        timeout_s: float = 120.0,
        die_with_parent: bool = False,
        host: str = "127.0.0.1",
        advertise: str | None = None,
    ) -> None:
        self.env, self.timeout_s, self.die_with_parent = env, timeout_s, die_with_parent
        self.port = port or free_port()
        base = list(command or [sys.executable, "-m", "agentgym.launcher", "serve", env, "--log-level", "warning"])
        bind = [] if host == "127.0.0.1" else ["--host", host]  # the launcher's default is 127.0.0.1
        self.command = base + ["--port", str(self.port), *bind, *args]
        self.environ = dict(environ) if environ is not None else None
        self.log = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix=f"agentgym-{env}-", suffix=".log")[1])
        self.url = ServerUrl(f"http://{advertise or host}:{self.port}")
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def launch(self) -> "ServerProcess":
        """Start the process without waiting for it to answer."""
        preexec = _die_with_parent if self.die_with_parent and sys.platform == "linux" else None
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=self.environ, preexec_fn=preexec
            )
        self.url.port, self.url.pid, self.url.log = self.port, self.proc.pid, self.log
        return self

    def exit_code(self) -> int | None:
        """The process's exit code (negative: killed by that signal), or None while it runs."""
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log, lines)

    def start(self) -> "ServerProcess":
        """Start the process and wait for ``GET /`` to answer ``"ok"``;
        `RuntimeError` with the log's tail if it does not."""
        self.launch()
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.env} server exited with {self.proc.returncode}; log {self.log}:\n{_tail(self.log)}"
                )
            if healthy(self.url):
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"{self.env} server not healthy after {self.timeout_s:.0f} s; log {self.log}:\n{_tail(self.log)}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, without cleanup. A paused (SIGSTOPped) server dies as it is:
        it is not resumed first, since a resumed server could answer a queued request (a health check, say)
        before the kill lands and look alive to whoever asked."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections; nothing is answered."""
        assert self.proc is not None, "not started"
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None, "not started"
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Terminate (then kill after 10 s); a paused server is woken first so it can exit."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _die_with_parent() -> None:
    """In the child, before exec: ask for SIGKILL when the parent thread exits (``prctl(PR_SET_PDEATHSIG)``)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@contextmanager
def serve_subprocess(env: str, port: int | None = None, timeout_s: float = 120.0, **options) -> Iterator[ServerUrl]:
    """A healthy ``env`` server for the ``with`` block; yields its URL (options as `ServerProcess`).
    Without a ``log_path`` its log is a temporary file, deleted when the block ends without an error
    (kept, and named in the error, when the server fails to start)."""
    server = ServerProcess(env, port, timeout_s=timeout_s, **options).start()
    try:
        yield server.url
    finally:
        server.stop()
    if options.get("log_path") is None:
        server.log.unlink(missing_ok=True)
