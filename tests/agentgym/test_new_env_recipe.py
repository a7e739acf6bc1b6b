"""The "add an environment" recipe (docs/environments.md), followed from scratch: the example package
``examples/new_env/guess`` copied to ``agentgym/guess/`` of a copy of the tree, and no other file touched. The
launcher lists it, the data preparation writes its splits, and the shared env tests, unedited, run on it: the
registry's, the HTTP contract's and every-env checks (the agent's client plays its expert, memory stays flat over
1,000 create/reset/close cycles, 10,000 random requests get no 5xx)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHARED_TESTS = ["test_registry.py", "test_env_http_contract.py", "test_all_envs.py"]


def run(args: list[str], tree: Path) -> subprocess.CompletedProcess[str]:
    """``args`` with ``tree``'s ``agentgym`` first on the import path (it is the working folder too)."""
    environ = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(args, cwd=tree, env=environ, capture_output=True, text=True, timeout=600)


def test_a_new_env_is_one_package_that_every_shared_check_picks_up(tmp_path: Path) -> None:
    no_cache = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "agentgym", tmp_path / "agentgym", ignore=no_cache)
    shutil.copytree(ROOT / "examples" / "new_env" / "guess", tmp_path / "agentgym" / "guess", ignore=no_cache)

    listed = run([sys.executable, "-m", "agentgym.launcher", "list"], tmp_path)
    assert "guess" in listed.stdout.split(), listed.stderr

    prepared = run([sys.executable, str(ROOT / "scripts" / "prepare_data.py"), "--env_name", "guess"], tmp_path)
    assert prepared.returncode == 0, prepared.stderr
    test = pd.read_parquet(tmp_path / "data" / "guess" / "test.parquet")
    assert (len(test), test.iloc[0]["data_source"], test.iloc[0]["extra_info"]["index"]) == (50, "guess", 0)

    tests = [str(ROOT / "tests" / "agentgym" / name) for name in SHARED_TESTS]
    checked = run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *tests, "-k", "guess or test_registry"],
        tmp_path,
    )
    summary = checked.stdout.strip().splitlines()[-1]
    assert checked.returncode == 0 and summary.startswith("14 passed"), checked.stdout[-3000:]
    passed = {line.split("::")[-1] for line in checked.stdout.splitlines() if line.startswith("PASSED")}
    assert {
        "test_every_env_package_is_found_by_name",
        "test_a_closed_env_is_gone_from_every_route[guess]",
        "test_bad_input_is_a_4xx_with_a_message_and_changes_nothing[guess]",
        "test_the_agents_client_plays_the_expert_on_a_test_task[guess]",
    } <= passed, passed
