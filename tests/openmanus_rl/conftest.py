"""Fixtures for the agent tests: the SmolLM2 tokenizer and real env server processes.

Servers (our WebShop through the launcher, or the toy family-B server) run as
their own processes on free ports, are polled on ``GET /`` until healthy and
stopped at the end of the session.  A `ServerProcess` can be killed, paused
(SIGSTOP: a hung server that accepts connections and never answers), resumed
and started again on the same port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import requests

from agent_helpers import free_port

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


class ServerProcess:
    def __init__(self, command: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = command + ["--port", str(self.port)]
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ServerProcess":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                if requests.get(self.url + "/", timeout=2).json() == "ok":
                    return self
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server not healthy after {START_TIMEOUT_S:.0f}s:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, without cleanup."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel, nothing is answered."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from model_prep import prepare_tokenizer

    return AutoTokenizer.from_pretrained(str(prepare_tokenizer()))


@pytest.fixture(scope="session")
def spawn_server(cache_dir: Path, shop: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ServerProcess]]:
    """``spawn_server("webshop" | "toy", *extra_args)`` -> a running `ServerProcess`, stopped at session end.

    Uses the session's private cache (``cache_dir`` and ``shop`` from tests/conftest.py)."""
    logs = tmp_path_factory.mktemp("server-logs")
    env = dict(os.environ, OPENMANUS_CACHE=str(cache_dir), PYTHONUNBUFFERED="1")
    env.pop("WEBSHOP_DATA_DIR", None)
    started: list[ServerProcess] = []
    commands = {
        "webshop": [sys.executable, "-m", "agentgym.launcher", "serve", "webshop", "--log-level", "warning"],
        "toy": [sys.executable, str(Path(__file__).with_name("toy_server.py"))],
    }

    def start(kind: str, *args: str) -> ServerProcess:
        server = ServerProcess(commands[kind] + list(args), logs / f"{kind}-{len(started)}.log", env)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def webshop_server(spawn_server: Callable[..., ServerProcess]) -> ServerProcess:
    """The shared WebShop server (never killed or paused by a test)."""
    return spawn_server("webshop")


@pytest.fixture(scope="session")
def toy_server(spawn_server: Callable[..., ServerProcess]) -> ServerProcess:
    """The shared toy family-B server (no prefix, reset field ``data_idx``)."""
    return spawn_server("toy")
