"""The task files an evaluation reads: ``<data_dir>/<env>/<split>.parquet``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPLITS = ("train", "dev", "test")


def task_file(data_dir: str | os.PathLike[str], env: str, split: str) -> Path:
    """``<data_dir>/<env>/<split>.parquet`` (whether or not it exists)."""
    return Path(data_dir) / env / f"{split}.parquet"


def ensure_task_file(data_dir: str | os.PathLike[str], env: str, split: str) -> Path:
    """``<data_dir>/<env>/<split>.parquet``, written with ``scripts/prepare_data.py`` when missing."""
    path = task_file(data_dir, env, split)
    if path.is_file():
        return path
    script = REPO / "scripts" / "prepare_data.py"
    if not script.is_file():
        raise FileNotFoundError(f"task file {path} is missing and {script} (which writes it) is not there")
    print(f"[eval] {path} is missing; running {script.name} --env_name {env} --out {data_dir}", flush=True)
    subprocess.run([sys.executable, str(script), "--env_name", env, "--out", str(data_dir)], check=True)
    if not path.is_file():
        raise FileNotFoundError(f"{script.name} ran but did not write {path}")
    return path
