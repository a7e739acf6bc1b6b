"""`PhaseTimer`: wall seconds per phase, summed over calls, mirrored into step metrics."""

import pytest

from verl.utils import timing
from verl.utils.timing import PhaseTimer


def test_phase_timer_sums_each_phase_and_writes_its_total(monkeypatch):
    clock = iter([0.0, 1.5, 10.0, 10.25, 20.0, 23.0])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    metrics = {"other": 1.0}
    timer = PhaseTimer(metrics)
    with timer("generation"):
        pass
    with timer("generation"):
        pass
    with pytest.raises(RuntimeError), timer("env"):  # a phase that fails still counts
        raise RuntimeError("boom")
    assert dict(timer.totals) == {"generation": 1.75, "env": 3.0}
    assert metrics == {"other": 1.0, "timing_s/generation": 1.75, "timing_s/env": 3.0}


def test_a_tagged_timer_says_when_a_long_phase_ends(monkeypatch, capsys):
    clock = iter([0.0, 19.9, 30.0, 95.4])  # 19.9 s: short; 65.4 s: long
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    timer = PhaseTimer({}, "[step 3]", 20.0)
    with timer("old_log_prob"):
        pass
    with timer("update_actor_total"):
        pass
    assert capsys.readouterr().out == "[step 3] update_actor_total: 65 s\n"
