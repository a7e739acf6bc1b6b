"""`PhaseTimer`: wall seconds per named phase, summed over every time the phase ran."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator


class PhaseTimer:
    """``with timer("generation"): ...`` adds the block's wall seconds to ``timer.totals["generation"]``.

    With ``metrics`` given, each finished phase also writes its running total to
    ``metrics["timing_s/<phase>"]`` (the trainer's step metrics).
    """

    def __init__(self, metrics: dict[str, float] | None = None) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.metrics = metrics

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[phase] += time.perf_counter() - start
            if self.metrics is not None:
                self.metrics[f"timing_s/{phase}"] = self.totals[phase]
