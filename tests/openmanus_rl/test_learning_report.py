"""scripts/learning_report.py on a committed learning folder (two arms from one warm start): every arm reported,
none overwriting another."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from script_modules import load_script

RUN = Path(__file__).resolve().parents[2] / "docs" / "results" / "rm_arms"


@pytest.fixture
def run_copy(tmp_path: Path) -> Path:
    """The result files of ``docs/results/rm_arms`` (no report yet), copied."""
    out = tmp_path / "rm_arms"
    out.mkdir()
    for path in RUN.iterdir():
        if path.suffix in (".json", ".jsonl") and path.name not in ("metrics.jsonl", "phases.jsonl"):
            shutil.copyfile(path, out / path.name)
    return out


def test_every_arm_in_the_folder_is_reported(run_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    report = load_script("learning_report")
    assert report.arms(run_copy) == ["grpo", "rm"]
    monkeypatch.setattr(sys, "argv", ["learning_report.py", str(run_copy)])
    report.main()
    assert (run_copy / "table.md").read_text() == (
        "| policy | test tasks | success (95% CI) | mean reward | invalid-action rate |\n"
        "|---|---|---|---|---|\n"
        "| base | 100 | 0.000 (0.000-0.037) | 0.000 | 0.899 |\n"
        "| warm_start | 200 | 0.225 (0.173-0.288) | 0.399 | 0.005 |\n"
        "| grpo | 200 | 0.380 (0.316-0.449) | 0.734 | 0.000 |\n"
        "| grpo_best | 200 | 0.390 (0.325-0.459) | 0.716 | 0.000 |\n"
        "| rm | 200 | 0.420 (0.354-0.489) | 0.696 | 0.000 |\n"
        "| rm_best | 200 | 0.420 (0.354-0.489) | 0.696 | 0.000 |\n"
        "| expert | 200 | 0.840 | 0.921 | 0 |\n"
    )
    text = (run_copy / "comparisons.txt").read_text()
    assert [line.split("/")[-1] for line in text.splitlines() if line.startswith("B: ")] == [
        "warm_start.json",
        "grpo.json",
        "grpo_best.json",
        "rm.json",
        "rm_best.json",
    ]
    # warm start -> the reward-model arm: 40 goals gained, 1 lost (docs/rewards.md)
    assert "success      0.2250   0.4200  +0.1950  [0.1400, 0.2550]" in text
    assert "b (A fails, B succeeds) = 40, c (A succeeds, B fails) = 1, p = 3.82e-11" in text
    assert (run_copy / "dev_success.png").stat().st_size > 0
    assert capsys.readouterr().out.startswith(f"A: {run_copy}/base.json")


def test_a_folder_without_an_arm_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["learning_report.py", str(tmp_path)])
    with pytest.raises(SystemExit, match=f"{tmp_path}: no RL arm"):
        load_script("learning_report").main()
