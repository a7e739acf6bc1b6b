#!/usr/bin/env python
"""Benchmark multi-turn WebShop rollouts: the batched agent against the one-at-a-time baseline.

    .venv/bin/python scripts/bench_rollout.py                  # SmolLM2-135M-Instruct, 32 trajectories
    .venv/bin/python scripts/bench_rollout.py --tiny --trajectories 8 --max-turns 2   # a quick smoke run
    .venv/bin/python scripts/bench_rollout.py --no-baseline --json bench.json --output-dir /tmp/bench_records

Both runs roll out the same WebShop test tasks (session ids 0..N-1) with the
same per-trajectory seeds, through the same in-process vLLM rollout worker
(``ActorRolloutRefWorker(role="rollout")``) and the same `OpenManusAgent`:

* batched: ``run_llm_loop``: every turn, all running trajectories in one
  generation call; env calls on a thread pool; several WebShop servers;
* baseline: ``_run_single_rollout`` per task, one after the other: batch-size-1
  generation and sequential env calls (the upstream pattern).

Reported per run: trajectories/s, generated tokens/s, and the share of wall
time spent in generation, in env calls and in the agent's own work (prompt
and sequence building, parsing, output tensors).  The speed-up is the ratio
of the two runs' trajectories/s (and of tokens/s, since sampled lengths may
differ slightly).  Servers and the engine share this machine's cores, so the
figures are for this box only.
"""

from __future__ import annotations

import argparse
import json
import os
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
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    worker = ActorRolloutRefWorker({
        "model": {"path": model_path},
        "num_threads": args.threads,
        "rollout": {"name": "vllm", "dtype": args.dtype, "kv_cache_gb": args.kv_cache_gb,
                    "max_model_len": args.max_trajectory_length + 64},
    }, role="rollout")
    worker.init_model()
    return worker


def summary(name: str, wall: float, trajectories: int, metrics: dict[str, float], load: tuple[float, float]) -> dict[str, Any]:
    generation, env = metrics["timing_s/generation"], metrics["timing_s/env"]
    tokens = metrics["rollout/generated_tokens"]
    return {
        "run": name, "trajectories": trajectories, "wall_s": wall, "load_average_1min_start_end": load,
        "trajectories_per_s": trajectories / wall, "generated_tokens": tokens, "generated_tokens_per_s": tokens / wall,
        "share_generation": generation / wall, "share_env": env / wall,
        "share_overhead": max(0.0, wall - generation - env) / wall,
        "turns_mean": metrics["env/turns/mean"], "success_rate": metrics["env/success_rate"],
        "invalid_action_rate": metrics["env/invalid_action_rate"], "failed": metrics["env/failed_trajectories"],
    }


def merge(parts: list[dict[str, float]]) -> dict[str, float]:
    """Sum the timing and token metrics of single-trajectory runs; average the per-episode rates."""
    keys_sum = ("timing_s/generation", "timing_s/env", "rollout/generated_tokens", "env/failed_trajectories")
    keys_mean = ("env/turns/mean", "env/success_rate", "env/invalid_action_rate")
    out = {k: sum(p[k] for p in parts) for k in keys_sum}
    out.update({k: sum(p[k] for p in parts) / len(parts) for k in keys_mean})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="Hugging Face folder (default: SmolLM2-135M-Instruct, prepared once)")
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
    parser.add_argument("--dtype", default="auto", help="engine dtype; auto: bf16 where the CPU runs it natively, else fp32")
    parser.add_argument("--kv-cache-gb", type=float, default=2.0)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--output-dir", default=None, help="write the batched run's trajectory records (JSONL + viewer) here")
    args = parser.parse_args()
    if args.trajectories % args.n:
        sys.exit("--trajectories must be a multiple of --n")

    from transformers import AutoTokenizer

    from openmanus_rl.agent import OpenManusAgent, trajectory_seed
    from verl.protocol import DataProto
    import model_prep
    from verl.utils.precision import describe_cpu, resolve_dtype

    chosen = resolve_dtype(args.dtype, "cpu", "infer")
    args.dtype = chosen.dtype

    if args.tiny:
        model_path = str(model_prep.build_tiny_model(Path(tempfile.gettempdir()) / "bench_rollout_tiny_model"))
    else:
        model_path = args.model or str(model_prep.prepare_default_model())
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tasks = list(range(args.trajectories // args.n))
    batch = DataProto.from_dict(non_tensors={"data_source": ["webshop"] * len(tasks),
                                             "extra_info": [{"index": t, "split": "test"} for t in tasks]})

    with ExitStack() as stack:
        ports = [stack.enter_context(webshop_server()) for _ in range(args.servers)]
        worker = rollout_worker(model_path, args)
        stack.callback(worker.shutdown)
        config = {"env_ports": ports, "n": args.n, "max_turns": args.max_turns,
                  "max_response_length": args.max_response_length, "max_obs_length": args.max_obs_length,
                  "max_prompt_length": args.max_prompt_length, "max_trajectory_length": args.max_trajectory_length,
                  "concurrency": args.concurrency, "temperature": args.temperature}
        agent = stack.enter_context(OpenManusAgent(tokenizer, worker, config))
        print(f"[bench] {describe_cpu()}; engine dtype {chosen.dtype} ({chosen.reason})", flush=True)
        print(f"[bench] model {model_path}; {args.trajectories} trajectories ({len(tasks)} tasks x n={args.n}), "
              f"<= {args.max_turns} turns x {args.max_response_length} tokens; {args.servers} WebShop servers", flush=True)
        agent.run_llm_loop(batch[:1], global_step=-1)  # warm-up: engine kernels, server caches

        load, start = os.getloadavg()[0], time.perf_counter()
        out = agent.run_llm_loop(batch, output_dir=args.output_dir)
        results = [summary("batched", time.perf_counter() - start, len(out), out.meta_info["metrics"],
                           (load, os.getloadavg()[0]))]

        if not args.no_baseline:
            parts = []
            load, start = os.getloadavg()[0], time.perf_counter()
            for row, task in enumerate(tasks):
                for copy in range(args.n):
                    single = agent._run_single_rollout(task, seed=trajectory_seed(0, 0, row, copy))
                    parts.append(single.meta_info["metrics"])
            results.append(summary("baseline (one at a time, batch size 1)", time.perf_counter() - start,
                                   len(parts), merge(parts), (load, os.getloadavg()[0])))

    header = (f"{'run':<40} {'traj/s':>8} {'gen tok/s':>10} {'wall s':>8} {'gen %':>6} {'env %':>6} {'own %':>6} "
              f"{'turns':>6} {'invalid':>8} {'load':>11}")
    print(header)
    for r in results:
        print(f"{r['run']:<40} {r['trajectories_per_s']:>8.3f} {r['generated_tokens_per_s']:>10.1f} {r['wall_s']:>8.1f} "
              f"{100 * r['share_generation']:>6.1f} {100 * r['share_env']:>6.1f} {100 * r['share_overhead']:>6.1f} "
              f"{r['turns_mean']:>6.2f} {r['invalid_action_rate']:>8.2f} "
              "{:>5.2f}-{:<5.2f}".format(*r["load_average_1min_start_end"]))
    print(f"load: 1-minute load average at the start and end of each run on {os.cpu_count()} cores; "
          "other work on the cores slows a run, so compare runs with similar load")
    report: dict[str, Any] = {"config": vars(args), "model": model_path, "cpu_count": os.cpu_count(), "runs": results}
    if len(results) == 2:
        batched, baseline = results
        report["speedup_trajectories_per_s"] = batched["trajectories_per_s"] / baseline["trajectories_per_s"]
        report["speedup_tokens_per_s"] = batched["generated_tokens_per_s"] / baseline["generated_tokens_per_s"]
        print(f"speed-up (batched / baseline): {report['speedup_trajectories_per_s']:.2f}x trajectories/s, "
              f"{report['speedup_tokens_per_s']:.2f}x generated tokens/s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
