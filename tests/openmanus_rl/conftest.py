"""Fixtures for the agent tests: the SmolLM2 tokenizer and real env server processes.

Servers (our WebShop through the launcher, or the toy family-B server) run as
their own processes on free ports, are polled on ``GET /`` until healthy and
stopped at the end of the session.  A `ServerProcess` can be killed, paused
(SIGSTOP: a hung server that accepts connections and never answers), resumed
and started again on the same port.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from agentgym.spawn import ServerProcess

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    from model_prep import prepare_tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(prepare_tokenizer()))


@pytest.fixture(scope="session")
def spawn_server(
    cache_dir: Path, shop: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ServerProcess]]:
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
        server = ServerProcess(
            kind,
            args=args,
            command=commands[kind],
            environ=env,
            log_path=logs / f"{kind}-{len(started)}.log",
            timeout_s=START_TIMEOUT_S,
        )
        started.append(server)
        try:
            return server.start()
        except RuntimeError as exc:
            pytest.fail(str(exc))

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


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_path: str) -> Iterator[Any]:
    """One in-process vLLM rollout worker on the tiny model (fp32, 1 GiB KV cache), shared by every test that
    needs the real engine."""
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    worker = ActorRolloutRefWorker(
        {
            "model": {"path": tiny_model_path},
            "num_threads": 1,
            "rollout": {"name": "vllm", "dtype": "float32", "kv_cache_gb": 1, "max_model_len": 1024},
        },
        role="rollout",
    )
    worker.init_model()
    yield worker
    worker.shutdown()
