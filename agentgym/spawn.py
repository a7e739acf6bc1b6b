"""Start an environment server as a child process and wait until it is healthy.

    with serve_subprocess("webshop") as url:      # http://127.0.0.1:<free port>
        ...

The server runs through the launcher (``python -m agentgym.launcher serve``),
logs to a temporary file, and must answer ``GET /`` with ``"ok"`` within
``timeout_s``; otherwise (or if it exits) `RuntimeError` gives the log's tail.
It is terminated (then killed) on exit.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: str, lines: int = 30) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextmanager
def serve_subprocess(env: str, port: int | None = None, timeout_s: float = 120.0) -> Iterator[str]:
    """A healthy ``env`` server on ``port`` (a free one by default); yields its URL."""
    import requests

    port = port or free_port()
    log = tempfile.NamedTemporaryFile(prefix=f"agentgym-{env}-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "agentgym.launcher", "serve", env, "--port", str(port), "--log-level", "warning"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{env} server exited with {proc.returncode}; log {log.name}:\n{_tail(log.name)}")
            try:
                if requests.get(url + "/", timeout=2).json() == "ok":
                    break
            except (requests.RequestException, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{env} server not healthy after {timeout_s:.0f} s; log {log.name}:\n{_tail(log.name)}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
