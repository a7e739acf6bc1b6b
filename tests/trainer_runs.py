"""The trainers run as a user runs them: ``python -m verl.trainer.<entry> overrides`` in a child process, from the
repository root, with unbuffered output.

    proc = run_entry("main_ppo", [*args, *SMALL_BOX])           # the finished process
    rows = metric_rows(out)                                    # its metrics.jsonl rows
    step = by_step(rows, 1)                                    # step 1's metrics, merged
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
SMALL_BOX = ["trainer.threads_per_worker=1", "ray_init.num_cpus=2"]  # a run beside the tests on 2 cores


def run_entry(
    entry: str, args: Sequence[str], import_paths: Sequence[Path] = (), timeout_s: float = 900
) -> subprocess.CompletedProcess:
    """``python -m verl.trainer.<entry> *args``, its output captured; ``import_paths`` go first on its PYTHONPATH
    (test helpers a plugin names, e.g. ``fixed_rollout:PLUGIN``)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if import_paths:
        env["PYTHONPATH"] = os.pathsep.join([*map(str, import_paths), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", f"verl.trainer.{entry}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )


def check_ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``proc``, which must have exited 0 (else its output's tails are the failure message)."""
    assert proc.returncode == 0, (
        f"{proc.args[2]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    return proc


def metric_rows(out_dir: Path | str) -> list[dict]:
    return [json.loads(line) for line in (Path(out_dir) / "metrics.jsonl").read_text().splitlines()]


def by_step(rows: list[dict], step: int) -> dict:
    """Every metric logged at ``step``, merged."""
    return {k: v for r in rows if r["step"] == step for k, v in r.items()}
