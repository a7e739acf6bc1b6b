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
