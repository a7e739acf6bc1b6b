"""Shared fixtures.

* ``tiny_model_path``: a tiny random Llama with the real SmolLM2 tokenizer.
* ``ray_local``: a local Ray instance.
* ``cache_dir``, ``shop``, ``start_server``, ``server``: real WebShop server
  processes, started through the launcher on free ports, polled on ``GET /``
  until healthy and killed at teardown; all share one temporary cache, so the
  catalogue and search index are generated once per session.
* ``webshop_tasks``, ``countdown_data``: the parquet files of a tiny main-job
  run (WebShop: 16 train and 2 test tasks; countdown: 8/2/2), written once per
  session by the project's own scripts.  A new end-to-end test that runs the
  main job builds on these and on ``server`` instead of making its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import torch

from agentgym.spawn import ServerProcess, ServerUrl

torch.set_num_threads(int(os.environ.get("OPENMANUS_TEST_THREADS", "2")))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))  # set-up helpers (model_prep) live there

IN_PROCESS_ENGINES = "in-process engines"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The pytest-xdist groups of ``scripts/test.sh`` (``--dist loadgroup``): a test file runs whole on one worker,
    so its module fixtures are made once; every test marked ``in_process_engine`` or using ``vllm_engine`` runs in
    one group, in collection order, as in a single process (vLLM keeps its process groups in module globals, and
    a torch.distributed worker shut down beside a live engine leaves that engine's groups dead)."""
    for item in items:
        shared = item.get_closest_marker("in_process_engine") or "vllm_engine" in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.xdist_group(IN_PROCESS_ENGINES if shared else str(item.path)))


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    from model_prep import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny_llama")))


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray with 4 logical CPUs (tests over-subscribe the 2 cores on purpose)."""
    import ray

    # worker classes defined in test modules must be importable inside Ray's worker processes
    test_dirs = [str(Path(__file__).parent / sub) for sub in ("", "verl", "openmanus_rl")]
    ray.init(
        address="local",
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(test_dirs)}},
    )
    yield ray
    ray.shutdown()


REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private ``OPENMANUS_CACHE`` for this session (in-process and for servers)."""
    path = tmp_path_factory.mktemp("openmanus-cache")
    saved = {k: os.environ.get(k) for k in ("OPENMANUS_CACHE", "WEBSHOP_DATA_DIR")}
    os.environ["OPENMANUS_CACHE"] = str(path)
    os.environ.pop("WEBSHOP_DATA_DIR", None)
    yield path
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def shop(cache_dir: Path) -> Any:
    from agentgym.webshop.data import load_shop

    return load_shop()


@contextlib.contextmanager
def running_server(
    cache_dir: Path, log_path: Path, *args: str, command: list[str] | None = None
) -> Iterator[ServerUrl]:
    """A WebShop server process on the session's cache; its base URL once ``GET /`` answers ``"ok"``."""
    env = dict(os.environ, OPENMANUS_CACHE=str(cache_dir), PYTHONUNBUFFERED="1")
    env.pop("WEBSHOP_DATA_DIR", None)
    server = ServerProcess(
        "webshop", args=args, command=command, environ=env, log_path=log_path, timeout_s=START_TIMEOUT_S
    )
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def start_server(cache_dir: Path, shop: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    """``with start_server(*args, command=None) as url:`` runs a server with extra launcher args."""
    logs = tmp_path_factory.mktemp("logs")

    def start(*args: str, command: list[str] | None = None) -> Any:
        return running_server(cache_dir, logs / f"webshop-{len(list(logs.iterdir()))}.log", *args, command=command)

    return start


@pytest.fixture(scope="session")
def server(start_server: Callable[..., Any]) -> Iterator[str]:
    """The shared WebShop server (default options) for this test session."""
    with start_server() as url:
        yield url


def run_script(name: str, *args: str) -> None:
    """``python scripts/<name>.py *args`` from the repository root; its output kept from the terminal, its failure
    raised."""
    import subprocess

    subprocess.run([sys.executable, f"scripts/{name}.py", *args], cwd=REPO, check=True, capture_output=True)


@pytest.fixture(scope="session")
def webshop_tasks(tmp_path_factory: pytest.TempPathFactory, shop: Any) -> Path:
    """``scripts/prepare_data.py --env_name webshop`` with 16 train and 2 test tasks:
    the folder of its parquet files."""
    out = tmp_path_factory.mktemp("data")
    run_script("prepare_data", "--out", str(out), *"--env_name webshop --train_size 16 --test_size 2".split())
    return out / "webshop"


@pytest.fixture(scope="session")
def countdown_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``scripts/make_countdown_data.py`` with 8 train, 2 dev and 2 test tasks (seed 0):
    the folder of its parquet files."""
    out = tmp_path_factory.mktemp("countdown")
    run_script("make_countdown_data", "--out_dir", str(out), *"--n_train 8 --n_dev 2 --n_test 2 --seed 0".split())
    return out
