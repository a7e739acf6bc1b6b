#!/usr/bin/env python
"""One-step-off training against the synchronous step: the same GRPO job, run both ways, side by side.

    .venv/bin/python scripts/bench_overlap.py                       # defaults: about 10 minutes on a quiet 2-core box
    .venv/bin/python scripts/bench_overlap.py --prompts 2 --group 4 --response_len 64 --steps 2 --repeats 1

The job is `scripts/bench_vs_trl.py`'s (the prepared SmolLM2-135M-Instruct, single-turn countdown
prompts, GRPO, ``--prompts`` x ``--group`` samples a step, one optimiser step a batch, vLLM in process),
run by ``python -m verl.trainer.main_ppo`` twice per repeat, interleaved:

* sync: ``trainer.staleness=0`` (each step rolls out with the newest weights, then trains);
* one-step-off: ``trainer.staleness=1`` with ``actor.tis_cap=2`` (the next step's rollout runs while
  this step trains; the worker generates and trains on two threads).

Seconds per step are the median ``timing_s/step`` over the measured steps of each run, then the
median over the repeats. Measured steps are those after ``--warmup`` and before the last: in
one-step-off the last step has no rollout ahead to overlap (the pipeline drains), so it is left
out in both modes. For one-step-off it also prints how much of each rollout
was hidden behind training (``timing_s/rollout - timing_s/rollout_wait``). Both modes share the same
cores: on a CPU box generation and training compete for them, so the gain is bounded by what one
side leaves idle (Python overheads, env latency, the engine's scheduling), not by the sum.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_vs_trl import (  # noqa: E402
    Job,
    add_job_arguments,
    child_env,
    log_tail,
    make_job,
    our_overrides,
    run_measured,
)

MODES = {"sync": ["trainer.staleness=0"], "one-step-off": ["trainer.staleness=1", "actor_rollout_ref.actor.tis_cap=2"]}


def run_mode(job: Job, work: Path, mode: str, repeat: int) -> dict[str, float]:
    """One run of ``mode``; its medians over the measured steps."""
    out_dir = work / f"{mode}_{repeat}"
    log = work / f"{mode}_{repeat}.log"
    cmd = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        *our_overrides(job, str(out_dir)),
        *MODES[mode],
        "trainer.experiment_name=bench_overlap",
    ]
    code, peak = run_measured(cmd, log, child_env(job.threads))
    if code != 0:
        sys.exit(f"{mode} run exited with {code}; log {log}:\n{log_tail(log)}")
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    measured = [r for r in rows if "timing_s/step" in r][job.warmup : -1]  # steady state: no warm-up, no drain
    if not measured:
        sys.exit(f"{mode} run logged no measured step (log {log})")
    hidden = [r["timing_s/rollout"] - r["timing_s/rollout_wait"] for r in measured if "timing_s/rollout_wait" in r]
    return {
        "s_per_step": statistics.median(r["timing_s/step"] for r in measured),
        "rollout_s": statistics.median(r["timing_s/rollout"] for r in measured),
        "hidden_s": statistics.median(hidden) if hidden else 0.0,
        "peak_gib": peak / 2**30,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(parser)
    parser.add_argument(
        "--threads", type=int, default=2, help="torch threads of the worker (generation and training each)"
    )
    parser.add_argument("--steps", type=int, default=3, help="measured steps (one more runs last and is left out)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each mode, interleaved")
    args = parser.parse_args()

    import psutil

    from verl.utils.precision import describe_cpu, resolve_dtype

    chosen = resolve_dtype("auto", "cpu")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench_overlap_"))
    job = make_job(args, work, chosen.dtype, kl=0.0, steps=args.steps + 1)  # + the drain step
    busy_before = psutil.cpu_percent(interval=2.0)
    print(f"[bench] work folder {work}; {args.repeats} repeat(s) of sync then one-step-off", flush=True)
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for repeat in range(args.repeats):
        for mode in MODES:
            results[mode].append(run_mode(job, work, mode, repeat))
            r = results[mode][-1]
            print(
                f"[bench] repeat {repeat + 1} {mode}: {r['s_per_step']:.2f} s/step (rollout {r['rollout_s']:.2f} s, "
                f"hidden behind training {r['hidden_s']:.2f} s)",
                flush=True,
            )

    med = {mode: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for mode, runs in results.items()}
    print()
    print(describe_cpu(torch_threads=False) + f"; {job.threads} torch threads; dtype {job.dtype} ({chosen.reason})")
    print(
        f"countdown GRPO: {job.prompts} prompts x {job.group} samples, response <= {job.response_len} tokens; "
        f"{job.warmup} warm-up + {args.steps} measured + 1 drain step per run, {args.repeats} run(s) per mode; "
        f"CPU {busy_before:.0f}% busy in the 2 s before the start"
    )
    print(f"{'':<34}{'sync':>12}{'one-step-off':>14}")
    for key, name in (
        ("s_per_step", "seconds per step (median)"),
        ("rollout_s", "rollout seconds (median)"),
        ("hidden_s", "rollout hidden behind training"),
        ("peak_gib", "peak memory, GiB (PSS)"),
    ):
        print(f"{name:<34}{med['sync'][key]:>12.2f}{med['one-step-off'][key]:>14.2f}")
    for mode, runs in results.items():
        print(f"{mode} seconds per step of each run: " + ", ".join(f"{r['s_per_step']:.2f}" for r in runs))
    print(
        f"speed-up per step (sync / one-step-off): {med['sync']['s_per_step'] / med['one-step-off']['s_per_step']:.2f}x"
    )


if __name__ == "__main__":
    main()
