#!/usr/bin/env python
"""Benchmark env servers: create + reset latency, step latency, and steps per second under concurrent clients.

    .venv/bin/python scripts/bench_env.py                       # every env with a server, one own server each
    .venv/bin/python scripts/bench_env.py --env_name webshop,maze --clients 1,8,32 --duration 10
    .venv/bin/python scripts/bench_env.py --env_name webshop --url http://127.0.0.1:36001

Each client is a thread of this process with one env, talking through the agent's own client (`EnvClient`).
It plays episodes on the env's test tasks, each step an action drawn (seeded) from its spec's ``probe_actions``
(a mix of valid moves and words the env must refuse), for up to 20 steps or until the episode ends; every
``/step`` counts.  Envs whose every env is a JVM (SciWorld) get at most `JVM_CLIENTS` clients.  Clients compete with the
server for the CPU on a small machine, so the figures are a lower bound.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from agentgym.launcher import ENVS
from agentgym.registry import get_env_spec
from agentgym.spawn import serve_subprocess
from agentgym.spec import load_object
from openmanus_rl.envs import EnvClient, RetryPolicy
from verl.utils.precision import describe_cpu

EPISODE_STEPS = 20
JVM_CLIENTS = 4
JVM_ENVS = {"sciworld"}  # every env is a JVM of its own


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile: the smallest value with at least a share ``q`` of ``values`` at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Player:
    """One client thread: one env, its latencies, a seeded action stream."""

    def __init__(self, env: str, url: str, seed: int, tasks: list[int]) -> None:
        self.client = EnvClient(get_env_spec(env), url, RetryPolicy(120.0, 0, 0.1))
        self.client.create()
        self.actions, self.tasks = get_env_spec(env).probe_actions, tasks
        self.rng = random.Random(seed)
        self.step_s: list[float] = []

    def episode(self) -> None:
        self.client.reset(self.rng.choice(self.tasks))
        for _ in range(EPISODE_STEPS):
            began = time.perf_counter()
            done = self.client.step(self.rng.choice(self.actions)).done
            self.step_s.append(time.perf_counter() - began)
            if done:
                return


def throughput(env: str, url: str, clients: int, duration: float, tasks: list[int]) -> dict[str, float]:
    players = [Player(env, url, seed, tasks) for seed in range(clients)]
    stop = time.monotonic() + duration

    def play(player: Player) -> None:
        while time.monotonic() < stop:
            player.episode()

    threads = [threading.Thread(target=play, args=(p,)) for p in players]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    steps = [s for p in players for s in p.step_s]
    for p in players:
        p.client.close()
    return {
        "clients": clients,
        "steps": len(steps),
        "steps_per_s": len(steps) / elapsed,
        "p50_ms": statistics.median(steps) * 1e3,
        "p95_ms": percentile(steps, 0.95) * 1e3,
    }


def create_reset_latency(env: str, url: str, n: int, tasks: list[int]) -> tuple[float, float]:
    times = []
    for i in range(n):
        client = EnvClient(get_env_spec(env), url, RetryPolicy(120.0, 0, 0.1))
        began = time.perf_counter()
        client.create()
        client.reset(tasks[i % len(tasks)])
        times.append(time.perf_counter() - began)
        client.close()
    return statistics.median(times) * 1e3, percentile(times, 0.95) * 1e3


@contextmanager
def server_for(env: str, url: str | None) -> Iterator[str]:
    if url is not None:
        yield url.rstrip("/")
        return
    try:
        with serve_subprocess(env, timeout_s=120) as own:
            yield own
    except RuntimeError as exc:
        sys.exit(f"{env} server did not come up: {exc}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env_name", default="all", help="comma-separated envs, or all (default %(default)s)")
    parser.add_argument("--url", help="benchmark this running server (one env only) instead of starting one")
    parser.add_argument("--clients", default="1,8", help="comma-separated client counts (default %(default)s)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per client count (default %(default)s)")
    parser.add_argument(
        "--resets", type=int, default=50, help="create+reset samples (default %(default)s; a tenth for JVM envs)"
    )
    args = parser.parse_args()
    benchable = [name for name in ENVS if get_env_spec(name).probe_actions]
    envs = benchable if args.env_name == "all" else [e.strip() for e in args.env_name.split(",")]
    unknown = [e for e in envs if e not in benchable]
    if unknown:
        parser.error(f"no server or no benchmark actions for {unknown}; envs: {benchable}")
    if args.url and len(envs) != 1:
        parser.error("--url names one server: give one --env_name with it")
    counts = [int(c) for c in args.clients.split(",")]
    print(f"clients are threads of this process; {describe_cpu(torch_threads=False)}")
    print(
        f"{'env':>10} | {'create+reset p50/p95 ms':>23} | {'clients':>7} | {'steps':>6} | {'steps/s':>8} | "
        f"{'step p50 ms':>11} | {'p95 ms':>7}"
    )
    print("-" * 92)
    for env in envs:
        jvm = env in JVM_ENVS
        tasks = [task_id for task_id, _ in load_object(get_env_spec(env).tasks)("test")][:200]
        with server_for(env, args.url) as url:
            c50, c95 = create_reset_latency(env, url, max(2, args.resets // 10) if jvm else args.resets, tasks)
            for clients in sorted({min(c, JVM_CLIENTS) if jvm else c for c in counts}):
                row = throughput(env, url, clients, args.duration, tasks)
                print(
                    f"{env:>10} | {c50:>10.1f} / {c95:>10.1f} | {clients:>7} | {row['steps']:>6} | "
                    f"{row['steps_per_s']:>8.0f} | {row['p50_ms']:>11.2f} | {row['p95_ms']:>7.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
