"""A killed evaluation, run again, plays only what it had not finished and writes what an uninterrupted run writes.

The drill: ``python -m openmanus_rl.eval`` (tiny model, HF engine, a real WebShop server) in a process
of its own, killed with SIGKILL once its journal holds three finished rollouts of six; the same command
again in this process; then the files against an uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from openmanus_rl.eval import main
from openmanus_rl.evaluation.results import journal_path_for, tasks_path_for

REPO = Path(__file__).resolve().parents[2]
NAMED = ("wall_s", "tasks_per_s", "tasks_file")  # how long the run took, and its file name: all a resume may change


def eval_args(model: str, server: str, data_dir: Path, out: Path) -> list[str]:
    return [
        "--model", model, "--engine", "hf", "--dtype", "float32", "--limit", "6", "--max_turns", "2",
        "--max_response_length", "24", "--server_url", server, "--data_dir", str(data_dir), "--out", str(out),
        "--threads", "1", "--batch_size", "1",
    ]  # fmt: skip


def finished_in(journal: Path) -> int:
    if not journal.is_file():
        return 0
    return sum(1 for line in journal.read_text().splitlines() if line.startswith('{"finished"'))


def comparable(summary: dict) -> dict:
    summary = {k: v for k, v in summary.items() if k not in NAMED}
    summary["config"] = {k: v for k, v in summary["config"].items() if k != "out"}
    return summary


@pytest.mark.slow
@pytest.mark.drills
def test_a_killed_evaluation_resumes_and_writes_the_uninterrupted_files(
    tiny_model_path: str, server: str, tmp_path: Path, capsys
):
    data_dir = tmp_path / "data"
    whole = tmp_path / "whole.json"
    assert main(eval_args(tiny_model_path, server, data_dir, whole)) == 0
    assert not journal_path_for(whole).exists()  # the journal goes once the files are written

    out = tmp_path / "resumed.json"
    journal = journal_path_for(out)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "openmanus_rl.eval", *eval_args(tiny_model_path, server, data_dir, out)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: finished_in(journal) >= 3 or proc.poll() is not None, "3 journaled rollouts", 300)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = finished_in(journal)
    assert 3 <= done < 6, done
    assert not out.exists()
    capsys.readouterr()

    assert main(eval_args(tiny_model_path, server, data_dir, out)) == 0
    printed = capsys.readouterr().out
    assert f"[eval] resuming from {journal}: {done} rollouts finished" in printed
    assert f"[eval] from the journal: {done} finished rollouts" in printed
    assert tasks_path_for(out).read_text() == tasks_path_for(whole).read_text()
    resumed_summary = json.loads(out.read_text())
    assert comparable(resumed_summary) == comparable(json.loads(whole.read_text()))
    assert not journal.exists()


@pytest.mark.slow
def test_restart_ignores_the_journal(tiny_model_path: str, server: str, tmp_path: Path, capsys):
    data_dir = tmp_path / "data"
    out = tmp_path / "e.json"
    journal = journal_path_for(out)
    journal.write_text('{"journal": 1, "key": {"model_sha256": "another model"}}\n')
    assert main([*eval_args(tiny_model_path, server, data_dir, out), "--limit", "1"]) == 0
    printed = capsys.readouterr().out
    assert f"[journal] {journal} was written for another rollout (differs in: " in printed
    assert (tmp_path / "e.journal.jsonl.stale").is_file()

    journal.write_text("not even a header")  # a torn first line: nothing to take back
    assert main([*eval_args(tiny_model_path, server, data_dir, out), "--limit", "1", "--restart"]) == 0
    assert "resuming" not in capsys.readouterr().out and not journal.exists()
