"""The end-of-run timing summary (scripts/run_summary.py), with literal lines."""

from __future__ import annotations

import json
from pathlib import Path

from run_summary import main, summary_lines


def _files(tmp_path: Path) -> tuple[Path, Path]:
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "timing.json").write_text(json.dumps({"demonstrations_s": 30.0, "sft_s": 200.0}))
    metrics = tmp_path / "metrics.jsonl"
    rows = [
        {"step": 0, "timing_s/validation": 12.5},
        {
            "step": 1,
            "timing_s/step": 90.0,
            "timing_s/rollout": 30.0,
            "timing_s/update_actor_total": 50.0,
            "timing_s/ref": 6.0,
            "timing_s/weight_sync": 1.0,
        },
        {"step": 2, "timing_s/step": 80.0, "timing_s/rollout": 40.0, "timing_s/update_actor_total": 35.0},
        {"step": 2, "timing_s/validation": 10.0},
    ]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return warm, metrics


def test_summary_of_a_run_that_built_its_warm_start(tmp_path: Path) -> None:
    warm, metrics = _files(tmp_path)
    lines = summary_lines(
        [("set-up and model", 20.0), ("data and config check", 5.0), ("warm start", 240.0)], warm, 300.0, metrics
    )
    assert lines == [
        "[summary] where the time went",
        "  set-up and model                       20.0 s",
        "  data and config check                   5.0 s",
        "  warm start                            240.0 s  (demonstrations 30.0 s, SFT 200.0 s)",
        "  validation at step 0                   12.5 s",
        "  RL step 1                              90.0 s  (update_actor_total 50.0, rollout 30.0, ref 6.0)",
        "  RL step 2                              80.0 s  (rollout 40.0, update_actor_total 35.0)",
        "  validation at step 2                   10.0 s",
        # 300 - (12.5 + 90 + 80 + 10) = 107.5
        "  trainer start-up and shutdown         107.5 s  (Ray, workers, engine, env servers, checkpoints)",
        "  total                                 565.0 s",
    ]


def test_a_reused_warm_start_and_a_trainer_that_wrote_nothing(tmp_path: Path, capsys) -> None:
    warm, _ = _files(tmp_path)
    assert (
        main(
            [
                "--phase",
                "warm start=3",
                "--warm_start",
                str(warm),
                "--trainer_s",
                "40",
                "--metrics",
                str(tmp_path / "missing.jsonl"),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines() == [
        "[summary] where the time went",
        "  warm start                              3.0 s",  # reused: no split
        "  trainer start-up and shutdown          40.0 s  (Ray, workers, engine, env servers, checkpoints)",
        "  total                                  43.0 s",
    ]
