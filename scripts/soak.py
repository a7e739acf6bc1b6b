"""Soak: many short training steps against real env servers, and whether memory grows.

    python scripts/soak.py [--steps 200] [--out outputs/soak] [--warmup 20] [extra main_ppo overrides]

Runs ``verl.trainer.main_ppo`` (GRPO, a tiny random Llama with the real
tokenizer, WebShop servers the trainer starts and supervises, vLLM rollout)
for ``--steps`` steps with no checkpoints and no validation, then reads the
per-step metrics and prints the current resident memory (RSS, GiB) of the
driver, the actor/rollout/reference worker and the env servers every 10 steps,
and for each the least-squares slope over the steps after ``--warmup``, in
MiB per 100 steps. Slopes near 0 (within the step-to-step noise printed beside
them) mean no leak.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

SERIES = {
    "driver": "memory/rss_gb/driver",
    "actor_rollout_ref": "memory/rss_gb/actor_rollout_ref",
    "env_servers": "memory/env_servers_rss_gb",
}


def slope_mib_per_100(steps: np.ndarray, gb: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of ``gb`` against ``steps`` in MiB per 100 steps, and the residuals' std in MiB."""
    fit = np.polyfit(steps, gb * 1024, 1)
    residuals = gb * 1024 - np.polyval(fit, steps)
    return float(fit[0] * 100), float(residuals.std())


def report(rows: list[dict], warmup: int) -> dict[str, dict[str, float]]:
    """Print the RSS table and slopes; returns ``{series: {first_gb, last_gb, slope_mib_per_100_steps, noise_mib}}``."""
    steps = [r for r in rows if SERIES["driver"] in r]
    names = [n for n, key in SERIES.items() if all(key in r for r in steps)]
    print("step " + " ".join(f"{n:>18}" for n in names))
    for r in steps:
        if r["step"] % 10 == 0 or r is steps[0] or r is steps[-1]:
            print(f"{r['step']:>4} " + " ".join(f"{r[SERIES[n]]:>18.3f}" for n in names))
    after = [r for r in steps if r["step"] > warmup] or steps
    x = np.array([r["step"] for r in after], dtype=float)
    summary = {}
    print(f"\ncurrent RSS, GiB; slope over steps {int(x[0])}-{int(x[-1])} (least squares), MiB per 100 steps:")
    for n in names:
        y = np.array([r[SERIES[n]] for r in after], dtype=float)
        slope, noise = slope_mib_per_100(x, y) if len(x) > 2 else (0.0, 0.0)
        summary[n] = {
            "first_gb": float(y[0]),
            "last_gb": float(y[-1]),
            "slope_mib_per_100_steps": slope,
            "noise_mib": noise,
        }
        print(
            f"  {n:<18} {y[0]:.3f} -> {y[-1]:.3f} GiB   slope {slope:+.1f} MiB/100 steps   "
            f"(residual std {noise:.1f} MiB)"
        )
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20, help="steps left out of the slope (allocators settle)")
    parser.add_argument("--out", default="outputs/soak")
    parser.add_argument("--port", type=int, default=36101)
    args, overrides = parser.parse_known_args()

    from model_prep import build_tiny_model

    out = Path(args.out).absolute()
    model = build_tiny_model(out / "tiny_model")
    subprocess.run(
        [
            sys.executable,
            "scripts/prepare_data.py",
            "--env_name",
            "webshop",
            "--out",
            str(out / "data"),
            "--train_size",
            "64",
            "--dev_size",
            "2",
            "--test_size",
            "2",
        ],
        cwd=ROOT,
        check=True,
    )
    tasks = out / "data" / "webshop"
    run = out / "run"
    cmd = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"actor_rollout_ref.model.path={model}",
        f"data.train_files={tasks}/train.parquet",
        f"data.val_files={tasks}/dev.parquet",
        "algorithm.adv_estimator=grpo",
        "agent.n=2",
        "data.train_batch_size=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.rollout.max_model_len=2048",
        "actor_rollout_ref.rollout.kv_cache_gb=1",
        f"agent.env_ports=[{args.port}]",
        "agent.manage_servers=true",
        "agent.max_turns=3",
        "agent.max_response_length=16",
        "agent.max_obs_length=96",
        "agent.max_prompt_length=1024",
        "agent.max_trajectory_length=1536",
        f"trainer.total_training_steps={args.steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=0",
        "trainer.save_freq=0",
        "trainer.resume_mode=disable",
        "trainer.logger=[jsonl]",
        f"trainer.output_dir={run}",
        "trainer.experiment_name=soak",
        *overrides,
    ]
    (run / "metrics.jsonl").unlink(missing_ok=True)
    print("[soak] " + " ".join(cmd[3:]), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    summary = report(rows, args.warmup)
    (out / "soak_summary.json").write_text(
        json.dumps({"steps": args.steps, "warmup": args.warmup, "series": summary}, indent=2)
    )
    print(f"[soak] wrote {out / 'soak_summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
