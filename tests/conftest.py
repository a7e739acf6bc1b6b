"""Shared fixtures: a tiny random Llama with the real SmolLM2 tokenizer, and a local Ray instance."""

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(int(os.environ.get("OPENMANUS_TEST_THREADS", "2")))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    from verl.utils.model_prep import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny_llama")))


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray with 4 logical CPUs (tests over-subscribe the 2 cores on purpose)."""
    import ray

    # worker classes defined in test modules must be importable inside Ray's worker processes
    test_dirs = [str(Path(__file__).parent / sub) for sub in ("", "verl", "openmanus_rl")]
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(test_dirs)}})
    yield ray
    ray.shutdown()
