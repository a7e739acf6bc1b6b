"""`PhaseTimer`: wall seconds per named phase, summed over every time the phase ran."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

LONG_PHASE_S = 20.0  # the trainer's phases that run this long say so when they end


class PhaseTimer:
    """``with timer("generation"): ...`` adds the block's wall seconds to ``timer.totals["generation"]``.

    With ``metrics`` given, each finished phase also writes its running total to
    ``metrics["timing_s/<phase>"]`` (the trainer's step metrics). With ``tag`` given, a phase that ran
    ``long_s`` seconds or more prints ``<tag> <phase>: <s> s`` when it ends (a long step shows where it is).
    """

    def __init__(self, metrics: dict[str, float] | None = None, tag: str | None = None, long_s: float = 0.0) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.metrics = metrics
        self.tag = tag
        self.long_s = long_s

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            self.totals[phase] += spent
            if self.metrics is not None:
                self.metrics[f"timing_s/{phase}"] = self.totals[phase]
            if self.tag is not None and spent >= self.long_s:
                print(f"{self.tag} {phase}: {spent:.0f} s", flush=True)
