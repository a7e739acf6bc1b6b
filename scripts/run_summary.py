"""Where a training run's time went: the phases before the trainer, then the trainer's steps and validations.

    python scripts/run_summary.py --phase set-up=12.5 --phase "warm start=250.1" --warm_start DIR \
        --trainer_s 610 --metrics outputs/webshop_grpo/metrics.jsonl

``run_training.sh`` prints it at the end of every run (also one that failed).
Rows: each ``--phase NAME=SECONDS`` in order; the warm start split into
demonstrations and SFT when ``--warm_start`` names a folder that was built
(its ``timing.json``; a reused warm start took no time); then, from the
trainer's ``metrics.jsonl``, each RL step (``timing_s/step`` with its largest
parts) and the validations (``timing_s/validation``); the trainer's start-up
and shutdown is its wall time (``--trainer_s``) minus those; and the total.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PARTS = ("rollout", "old_log_prob", "ref", "values", "update_critic", "update_actor_total", "weight_sync")


def _row(name: str, seconds: float, note: str = "") -> str:
    return f"  {name:<34} {seconds:>8.1f} s" + (f"  ({note})" if note else "")


def summary_lines(
    phases: list[tuple[str, float]], warm_start: Path | None, trainer_s: float | None, metrics: Path | None
) -> list[str]:
    """The summary as text lines (see the module docstring)."""
    lines = ["[summary] where the time went"]
    total = 0.0
    for name, seconds in phases:
        note = ""
        timing = warm_start / "timing.json" if warm_start else None
        if name == "warm start" and timing is not None and timing.is_file():
            t = json.loads(timing.read_text())
            if seconds >= t["demonstrations_s"] + t["sft_s"]:  # built by this run, not reused
                note = f"demonstrations {t['demonstrations_s']:.1f} s, SFT {t['sft_s']:.1f} s"
        lines.append(_row(name, seconds, note))
        total += seconds
    if trainer_s is not None:
        rows = []
        if metrics is not None and metrics.is_file():
            rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        inside = 0.0
        for row in rows:
            if "timing_s/step" in row:
                parts = sorted(((row.get(f"timing_s/{p}", 0.0), p) for p in PARTS), reverse=True)
                note = ", ".join(f"{p} {v:.1f}" for v, p in parts[:3] if v > 0)
                lines.append(_row(f"RL step {row['step']}", row["timing_s/step"], note))
                inside += row["timing_s/step"]
            if "timing_s/validation" in row:
                lines.append(_row(f"validation at step {row['step']}", row["timing_s/validation"]))
                inside += row["timing_s/validation"]
        lines.append(
            _row(
                "trainer start-up and shutdown",
                max(0.0, trainer_s - inside),
                "Ray, workers, engine, env servers, checkpoints",
            )
        )
        total += trainer_s
    lines.append(_row("total", total))
    return lines


def _phase(text: str) -> tuple[str, float]:
    name, _, seconds = text.rpartition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"--phase takes NAME=SECONDS, got {text!r}")
    return name, float(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", type=_phase, action="append", default=[], help="NAME=SECONDS, in order")
    parser.add_argument("--warm_start", type=Path, default=None, help="the warm-start folder (its timing.json)")
    parser.add_argument("--trainer_s", type=float, default=None, help="the trainer's wall time")
    parser.add_argument("--metrics", type=Path, default=None, help="the trainer's metrics.jsonl")
    args = parser.parse_args(argv)
    print("\n".join(summary_lines(args.phase, args.warm_start, args.trainer_s, args.metrics)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
