"""The trainers run as a user runs them: ``python -m verl.trainer.<entry> overrides`` in a child process, from the
repository root, with unbuffered output.

    args = grpo_step_args(model, data_dir, out, "single_turn")   # one small GRPO step's overrides
    proc = run_entry("main_ppo", args)                          # the finished process
    rows = metric_rows(out)                                    # its metrics.jsonl rows
    step = by_step(rows, 1)                                    # step 1's metrics, merged

Any other child Python (a script, ``-c`` code) runs the same way: ``last_line(run_python([script, *args], 300))``.
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
# replies of 16 tokens on a vLLM engine with a small KV cache; validation on 2 tasks before and after each step
SHORT_REPLIES = [
    "agent.max_response_length=16",
    "agent.max_prompt_length=512",
    "actor_rollout_ref.rollout.max_model_len=1024",
    "actor_rollout_ref.rollout.kv_cache_gb=1",
]
VALIDATE_EACH_STEP = ["data.val_batch_size=2", "trainer.val_before_train=true", "trainer.test_freq=1"]


def grpo_step_args(model: str | Path, data: str | Path, out: str | Path, rollout: str, *extra: str) -> list[str]:
    """``main_ppo`` overrides for one GRPO step of ``model`` through the ``rollout`` (``data.rollout``) on the
    parquet files ``data/{train,dev}.parquet``: 2 tasks x 2 samples in one optimiser step of 4, no validation,
    nothing saved, metrics in ``out/metrics.jsonl``, sized for a box shared with the tests (`SMALL_BOX`); then
    ``extra`` (a later override wins)."""
    return [
        f"actor_rollout_ref.model.path={model}",
        f"data.rollout={rollout}",
        f"data.train_files={data}/train.parquet",
        f"data.val_files={data}/dev.parquet",
        "algorithm.adv_estimator=grpo",
        "agent.n=2",
        "data.train_batch_size=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "trainer.total_training_steps=1",
        "trainer.val_before_train=false",
        "trainer.test_freq=0",
        "trainer.save_freq=0",
        "trainer.logger=[console,jsonl]",
        f"trainer.output_dir={out}",
        *SMALL_BOX,
        *extra,
    ]


def run_entry(
    entry: str, args: Sequence[str], import_paths: Sequence[Path] = (), timeout_s: float = 900
) -> subprocess.CompletedProcess:
    """``python -m verl.trainer.<entry> *args``, its output captured; ``import_paths`` go first on its PYTHONPATH
    (test helpers a plugin names, e.g. ``fixed_rollout:PLUGIN``)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if import_paths:
        env["PYTHONPATH"] = os.pathsep.join([*map(str, import_paths), os.environ.get("PYTHONPATH", "")])
    return run_python(["-m", f"verl.trainer.{entry}", *args], timeout_s, env)


def run_python(args: Sequence[str], timeout_s: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python *args`` from the repository root (a script, ``-m module`` or ``-c code``), its output captured."""
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout_s, env=env)


def last_line(proc: subprocess.CompletedProcess) -> str:
    """The last line ``proc`` printed, which must have exited 0 (`check_ok`)."""
    return check_ok(proc).stdout.strip().splitlines()[-1]


def check_ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``proc``, which must have exited 0 (else its output's tails are the failure message)."""
    assert proc.returncode == 0, (
        f"{' '.join(map(str, proc.args[1:3]))[:200]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
        f"{proc.stderr[-5000:]}"
    )
    return proc


def metric_rows(out_dir: Path | str) -> list[dict]:
    return [json.loads(line) for line in (Path(out_dir) / "metrics.jsonl").read_text().splitlines()]


def by_step(rows: list[dict], step: int) -> dict:
    """Every metric logged at ``step``, merged."""
    return {k: v for r in rows if r["step"] == step for k, v in r.items()}
