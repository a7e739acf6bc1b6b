"""Seeds of an RL arm pooled against one baseline: the two-level bootstrap on matrices whose interval is known by
hand, and the report over real result files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from openmanus_rl.eval import main
from openmanus_rl.evaluation.compare import compare
from openmanus_rl.evaluation.results import TaskResult
from openmanus_rl.evaluation.seeds import pooled_bootstrap_ci, seeds_report
from openmanus_rl.evaluation.stats import paired_bootstrap_ci


def test_a_constant_gain_has_a_point_interval():
    lo, hi = pooled_bootstrap_ci(np.full((3, 5), 0.25), resamples=500)
    assert lo == pytest.approx(0.25, abs=1e-12) and hi == pytest.approx(0.25, abs=1e-12)


def test_seeds_that_disagree_widen_the_interval_where_tasks_alone_would_not():
    # seed 0 gains 1 on every task, seed 1 loses 1 on every task: each task's mean over the seeds is 0, so a bootstrap
    # over tasks alone says [0, 0]; over seeds the resampled mean is +1, 0 or -1 with chances 1/4, 1/2, 1/4
    d = np.array([[1.0] * 4, [-1.0] * 4])
    assert paired_bootstrap_ci(np.zeros(4), d.mean(axis=0)) == (0.0, 0.0)
    assert pooled_bootstrap_ci(d, resamples=4000, seed=3) == (-1.0, 1.0)


def test_one_seed_is_the_bootstrap_over_tasks():
    # one seed, task 0 gains 1 and task 1 nothing: the resampled mean is 0, 1/2 or 1 (chances 1/4, 1/2, 1/4)
    assert pooled_bootstrap_ci(np.array([[1.0, 0.0]]), resamples=4000) == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"\(seeds, tasks\) matrix"):
        pooled_bootstrap_ci(np.zeros(3))


def _write(path: Path, successes: list[int]) -> Path:
    rows = [
        TaskResult(
            task_id=t,
            sample=0,
            success=bool(s),
            env_reward=float(s),
            turns=2,
            invalid_actions=0,
            failed=False,
            data_source="webshop",
        )
        for t, s in enumerate(successes)
    ]
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))
    return path


def test_the_report_pairs_each_seed_and_pools_them(tmp_path: Path, capsys):
    base = _write(tmp_path / "warm.tasks.jsonl", [0, 0, 0, 0, 1, 1, 0, 0])
    seeds = [
        _write(tmp_path / "s1.tasks.jsonl", [1, 1, 0, 0, 1, 1, 1, 0]),  # +3 of 8
        _write(tmp_path / "s2.tasks.jsonl", [1, 0, 0, 0, 1, 1, 0, 0]),  # +1 of 8
        _write(tmp_path / "s3.tasks.jsonl", [0, 0, 0, 0, 0, 0, 0, 0]),
    ]  # -2 of 8
    r = seeds_report(base, seeds, resamples=2000)
    assert [c["success"]["gain"] for c in r["per_seed"]] == [3 / 8, 1 / 8, -2 / 8]
    assert r["per_seed"][0] == compare(base, seeds[0], resamples=2000)
    p = r["pooled"]
    assert (r["shared_tasks"], p["seeds"]) == (8, 3)
    assert p["gain"] == pytest.approx((3 + 1 - 2) / 24) and p["base_mean"] == 0.25
    assert p["arm_mean"] == pytest.approx(0.25 + 2 / 24)
    assert p["ci95"] == list(
        pooled_bootstrap_ci(
            np.array([[1, 1, 0, 0, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, -1, -1, 0, 0]], dtype=float),
            resamples=2000,
        )
    )
    # seed 3's own interval: it loses tasks 4 and 5 and wins none, so every resample is <= 0, but some are 0
    assert r["per_seed"][2]["success"]["ci95"][1] == 0.0 and p["seeds_below_zero"] == 0

    assert main(["seeds", str(base), *map(str, seeds), "--resamples", "2000", "--json", str(tmp_path / "r.json")]) == 0
    printed = capsys.readouterr().out
    assert "pooled over 3 seed(s) x 8 tasks: success 0.2500 -> 0.3333, gain +0.0833" in printed
    assert "seeds significantly below 0: 0 of 3" in printed
    assert json.loads((tmp_path / "r.json").read_text())["pooled"]["gain"] == pytest.approx(1 / 12)


def test_a_seed_that_loses_everywhere_is_counted_below_zero(tmp_path: Path):
    base = _write(tmp_path / "warm.tasks.jsonl", [1] * 6)
    lost = _write(tmp_path / "s1.tasks.jsonl", [0] * 6)
    r = seeds_report(base, [lost], resamples=500)
    assert r["per_seed"][0]["success"]["ci95"] == [-1.0, -1.0] and r["pooled"]["seeds_below_zero"] == 1
