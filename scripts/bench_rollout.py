#!/usr/bin/env python
"""Benchmark multi-turn WebShop rollouts: async and turn-synchronous agent modes against the one-at-a-time baseline.

    .venv/bin/python scripts/bench_rollout.py                  # SmolLM2-135M-Instruct, 32 trajectories
    .venv/bin/python scripts/bench_rollout.py --tiny --trajectories 8 --max-turns 2 --repeats 1   # a quick smoke run
    .venv/bin/python scripts/bench_rollout.py --no-baseline --json bench.json --output-dir /tmp/bench_records

Every run rolls out the same WebShop test tasks (session ids 0..N-1) with the
same per-trajectory seeds, through the same in-process vLLM rollout worker
(``ActorRolloutRefWorker(role="rollout")``) and `OpenManusAgent`:

* async (``agent.rollout_mode=async``): each trajectory's next turn is
  submitted as soon as its reply and observation are back; the engine batches
  whatever is running (continuous batching); env calls overlap generation;
* sync (``rollout_mode=sync``): every turn, all running trajectories in one
  generation call, then their env calls on a thread pool;
* baseline: ``_run_single_rollout`` per task, one after the other: batch-size-1
  generation and sequential env calls (the upstream pattern).

Async and sync run ``--repeats`` times each, interleaved (so contention from
other work hits both alike); their medians are compared.  Reported per run:
trajectories/s, generated tokens/s, the share of wall time the agent spent
in generation, waiting on env calls alone, and in its own work, the engine's
prefix-cache hits over the prompt tokens it looked up (every turn's prompt
extends the last one, so only the new observation should need a prefill),
and the 1-minute load average at the start and end.  Servers and the engine
share this machine's cores, so the figures are for this box only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

from agentgym.spawn import serve_subprocess

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def webshop_server() -> Iterator[int]:
    """A WebShop server process on a free port, healthy on ``GET /``; yields the port."""
    try:
        with serve_subprocess("webshop") as url:
            yield url.port
    except RuntimeError as exc:
        sys.exit(f"WebShop server did not come up: {exc}")


def rollout_worker(model_path: str, args: argparse.Namespace) -> Any:
    """The evaluation's vLLM rollout worker (`openmanus_rl.evaluation.run.rollout_worker`) under this benchmark's
    threads, dtype, KV cache and length; its other settings are the evaluation's defaults."""
    from openmanus_rl.eval import build_parser
    from openmanus_rl.evaluation import run

    engine_args = build_parser().parse_args(
        ["--model", model_path, "--env_name", "webshop", "--engine", "vllm", "--threads", str(args.threads)]
        + ["--dtype", args.dtype, "--kv_cache_gb", str(args.kv_cache_gb)]
        + ["--max_trajectory_length", str(args.max_trajectory_length)]
    )
    return run.rollout_worker(model_path, engine_args)


def summary(
    name: str,
    wall: float,
    trajectories: int,
    metrics: dict[str, float],
    load: tuple[float, float],
    cache: dict[str, int],
) -> dict[str, Any]:
    generation, env = metrics["timing_s/generation"], metrics["timing_s/env"]
    tokens = metrics["rollout/generated_tokens"]
    return {
        "prefix_cache": cache,
        "run": name,
        "trajectories": trajectories,
        "wall_s": wall,
        "load_average_1min_start_end": load,
        "trajectories_per_s": trajectories / wall,
        "generated_tokens": tokens,
        "generated_tokens_per_s": tokens / wall,
        "share_generation": generation / wall,
        "share_env": env / wall,
        "share_overhead": max(0.0, wall - generation - env) / wall,
        "turns_mean": metrics["env/turns/mean"],
        "success_rate": metrics["env/success_rate"],
        "invalid_action_rate": metrics["env/invalid_action_rate"],
        "failed": metrics["env/failed_trajectories"],
    }


def block_size(worker: Any) -> int | str:
    """The engine's KV block size: prefix-cache hits come in whole blocks."""
    engine = getattr(getattr(worker.rollout, "llm", None), "llm_engine", None)
    return getattr(getattr(getattr(engine, "vllm_config", None), "cache_config", None), "block_size", "?")


def timed(worker: Any, run: Any) -> tuple[Any, float, tuple[float, float], dict[str, int]]:
    """``run()``'s result, wall seconds, load average at start and end, and prefix-cache lookups during it."""
    from verl.workers.rollout.base import prefix_cache_delta

    before, load = worker.prefix_cache_stats(), os.getloadavg()[0]
    start = time.perf_counter()
    out = run()
    wall = time.perf_counter() - start
    return out, wall, (load, os.getloadavg()[0]), prefix_cache_delta(before, worker.prefix_cache_stats()) or {}


def median_row(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over repeated runs (loads: lowest start, highest end)."""
    row: dict[str, Any] = {"run": name, "trajectories": runs[0]["trajectories"]}
    for key in (
        "trajectories_per_s",
        "generated_tokens_per_s",
        "wall_s",
        "share_generation",
        "share_env",
        "share_overhead",
        "turns_mean",
        "invalid_action_rate",
    ):
        row[key] = statistics.median(r[key] for r in runs)
    row["load_average_1min_start_end"] = (
        min(r["load_average_1min_start_end"][0] for r in runs),
        max(r["load_average_1min_start_end"][1] for r in runs),
    )
    row["prefix_cache"] = {k: sum(r["prefix_cache"].get(k, 0) for r in runs) for k in runs[0]["prefix_cache"]}
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'run':<40} {'traj/s':>8} {'gen tok/s':>10} {'wall s':>8} {'gen %':>6} {'env %':>6} {'own %':>6} "
        f"{'turns':>6} {'invalid':>8} {'cache hit':>16} {'load':>11}"
    )
    for r in rows:
        cache = r["prefix_cache"]
        hits = f"{cache['hits']}/{cache['queries']}" if cache.get("queries") else "n/a"
        print(
            f"{r['run']:<40} {r['trajectories_per_s']:>8.3f} {r['generated_tokens_per_s']:>10.1f} {r['wall_s']:>8.1f} "
            f"{100 * r['share_generation']:>6.1f} {100 * r['share_env']:>6.1f} {100 * r['share_overhead']:>6.1f} "
            f"{r['turns_mean']:>6.2f} {r['invalid_action_rate']:>8.2f} {hits:>16} "
            "{:>5.2f}-{:<5.2f}".format(*r["load_average_1min_start_end"])
        )


def merge(parts: list[dict[str, float]]) -> dict[str, float]:
    """Sum the timing and token metrics of single-trajectory runs; average the per-episode rates."""
    keys_sum = ("timing_s/generation", "timing_s/env", "rollout/generated_tokens", "env/failed_trajectories")
    keys_mean = ("env/turns/mean", "env/success_rate", "env/invalid_action_rate")
    out = {k: sum(p[k] for p in parts) for k in keys_sum}
    out.update({k: sum(p[k] for p in parts) / len(parts) for k in keys_mean})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=None, help="Hugging Face folder (default: SmolLM2-135M-Instruct, prepared once)"
    )
    parser.add_argument("--tiny", action="store_true", help="use a tiny random model instead (a smoke run)")
    parser.add_argument("--trajectories", type=int, default=32)
    parser.add_argument("--n", type=int, default=1, help="group size: trajectories per task")
    parser.add_argument("--servers", type=int, default=2, help="WebShop servers for the batched run")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-response-length", type=int, default=64)
    parser.add_argument("--max-obs-length", type=int, default=256)
    parser.add_argument("--max-prompt-length", type=int, default=512)
    parser.add_argument("--max-trajectory-length", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2, help="engine threads")
    parser.add_argument(
        "--dtype", default="auto", help="engine dtype; auto: bf16 where the CPU runs it fast, else fp32"
    )
    parser.add_argument("--kv-cache-gb", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each of async and sync (medians compared)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--output-dir", default=None, help="write the first async run's trajectory records (JSONL + viewer) here"
    )
    args = parser.parse_args()
    if args.trajectories % args.n or args.repeats < 1:
        sys.exit("--trajectories must be a multiple of --n, and --repeats at least 1")

    import model_prep
    from transformers import AutoTokenizer

    from openmanus_rl.agent import OpenManusAgent, trajectory_seed
    from openmanus_rl.evaluation import run
    from verl.protocol import DataProto
    from verl.utils.precision import describe_cpu, resolve_dtype

    chosen = resolve_dtype(args.dtype, "cpu", "infer")
    args.dtype = chosen.dtype

    if args.tiny:
        model_path = str(model_prep.build_tiny_model(Path(tempfile.gettempdir()) / "bench_rollout_tiny_model"))
    else:
        model_path = args.model or str(model_prep.prepare_default_model())
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tasks = list(range(args.trajectories // args.n))
    batch = DataProto.from_dict(
        non_tensors={
            "data_source": ["webshop"] * len(tasks),
            "extra_info": [{"index": t, "split": "test"} for t in tasks],
        }
    )

    with ExitStack() as stack:
        ports = [stack.enter_context(webshop_server()) for _ in range(args.servers)]
        worker = rollout_worker(model_path, args)
        stack.callback(worker.shutdown)
        config = {
            "env_ports": ports,
            "n": args.n,
            "max_turns": args.max_turns,
            "max_response_length": args.max_response_length,
            "max_obs_length": args.max_obs_length,
            "max_prompt_length": args.max_prompt_length,
            "max_trajectory_length": args.max_trajectory_length,
            "concurrency": args.concurrency,
            "sampling": run.sampling(args),  # --temperature, the rollout section's top-p and top-k
        }
        agents = {
            mode: stack.enter_context(OpenManusAgent(tokenizer, worker, {**config, "rollout_mode": mode}))
            for mode in ("async", "sync")
        }
        print(
            f"[bench] {describe_cpu()}; engine dtype {chosen.dtype} ({chosen.reason}); "
            f"VLLM_CPU_OMP_THREADS_BIND={os.environ.get('VLLM_CPU_OMP_THREADS_BIND')}; "
            f"cores this process may use {sorted(os.sched_getaffinity(0))}",
            flush=True,
        )
        print(
            f"[bench] model {model_path}; {args.trajectories} trajectories ({len(tasks)} tasks x n={args.n}), "
            f"<= {args.max_turns} turns x {args.max_response_length} tokens; {args.servers} WebShop servers; "
            f"KV cache {args.kv_cache_gb} GiB in blocks of {block_size(worker)} tokens (the prefix cache's unit)",
            flush=True,
        )
        for agent in agents.values():
            agent.run_llm_loop(batch[:1], global_step=-1)  # warm-up: engine kernels, server caches

        runs: dict[str, list[dict[str, Any]]] = {"async": [], "sync": []}
        for repeat in range(args.repeats):
            for mode, agent in agents.items():
                record = args.output_dir if repeat == 0 and mode == "async" else None
                out, wall, load, cache = timed(
                    worker, lambda agent=agent, record=record: agent.run_llm_loop(batch, output_dir=record)
                )
                runs[mode].append(
                    summary(f"{mode} #{repeat + 1}", wall, len(out), out.meta_info["metrics"], load, cache)
                )
                print(f"[bench] {mode} run {repeat + 1}: {len(out) / wall:.3f} trajectories/s", flush=True)
        results = [r for pair in zip(runs["async"], runs["sync"]) for r in pair]
        medians = [median_row(f"{mode} (median of {args.repeats})", runs[mode]) for mode in ("async", "sync")]

        if not args.no_baseline:

            def one_at_a_time() -> list[dict[str, float]]:
                return [
                    agents["sync"]._run_single_rollout(task, seed=trajectory_seed(0, 0, row, copy)).meta_info["metrics"]
                    for row, task in enumerate(tasks)
                    for copy in range(args.n)
                ]

            parts, wall, load, cache = timed(worker, one_at_a_time)
            medians.append(
                summary("baseline (one at a time, batch size 1)", wall, len(parts), merge(parts), load, cache)
            )

    print_table(results + medians)
    print(
        f"load: 1-minute load average at the start and end of each run on {os.cpu_count()} cores; "
        "other work on the cores slows a run, so compare runs with similar load"
    )
    print("cache hit: prompt tokens found in the engine's prefix cache / prompt tokens looked up")
    report: dict[str, Any] = {
        "config": vars(args),
        "model": model_path,
        "cpu_count": os.cpu_count(),
        "runs": results,
        "medians": medians,
    }
    rate = {r["run"].split(" ")[0]: r["trajectories_per_s"] for r in medians}
    report["speedup_async_over_sync"] = rate["async"] / rate["sync"]
    print(f"speed-up (medians, trajectories/s): async / sync {report['speedup_async_over_sync']:.2f}x", end="")
    if "baseline" in rate:
        report["speedup_async_over_baseline"] = rate["async"] / rate["baseline"]
        report["speedup_sync_over_baseline"] = rate["sync"] / rate["baseline"]
        print(
            f"; async / baseline {report['speedup_async_over_baseline']:.2f}x; "
            f"sync / baseline {report['speedup_sync_over_baseline']:.2f}x",
            end="",
        )
    print()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
