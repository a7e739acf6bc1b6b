#!/usr/bin/env python
"""Benchmark one WebShop server: steps per second under 1, 8 and 32 concurrent clients,
and the latency of create + reset.

    .venv/bin/python scripts/bench_env.py                    # starts its own server on a free port
    .venv/bin/python scripts/bench_env.py --url http://127.0.0.1:36001 --duration 10

Each client thread owns one env and plays episodes of six steps (search the
instruction, open the first hit, open Description, go back, pick the first
option value or re-open Description, buy) until the time is up; every /step
call counts.  Clients run as threads of this process, so on a small machine
they compete with the server for CPU: the figures are a lower bound.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import requests

from agentgym.spawn import serve_subprocess
from verl.utils.precision import describe_cpu

ROOT = Path(__file__).resolve().parents[1]
BUTTONS = {"back to search", "next >", "< prev", "description", "features", "reviews", "attributes", "buy now"}


@contextmanager
def own_server(extra: list[str]) -> Iterator[str]:
    try:
        with serve_subprocess("webshop", args=extra) as url:
            yield url
    except RuntimeError as exc:
        sys.exit(f"server did not come up: {exc}")


class Player:
    """One client thread's env and HTTP session."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = requests.Session()
        self.env = self.http.post(url + "/create", timeout=30).json()
        self.latencies: list[float] = []

    def step(self, action: str) -> dict:
        began = time.perf_counter()
        r = self.http.post(self.url + "/step", json={"env_idx": self.env, "action": action}, timeout=30)
        self.latencies.append(time.perf_counter() - began)
        r.raise_for_status()
        return r.json()

    def clickables(self) -> list[str]:
        r = self.http.get(self.url + "/available_actions", params={"env_idx": self.env}, timeout=30)
        return r.json()["clickables"]

    def episode(self, session_id: int) -> None:
        r = self.http.post(self.url + "/reset", json={"env_idx": self.env, "session_id": session_id}, timeout=30)
        instruction = r.json()[0].split(" [SEP] ")[2]
        self.step(f"search[{instruction}]")
        hits = [c for c in self.clickables() if c not in BUTTONS]
        self.step(f"click[{hits[0] if hits else 'back to search'}]")
        self.step("click[description]")
        self.step("click[< prev]")
        options = [c for c in self.clickables() if c not in BUTTONS]
        self.step(f"click[{options[0]}]" if options else "click[description]")
        self.step("click[buy now]")

    def close(self) -> None:
        self.http.post(self.url + "/close", json={"env_idx": self.env}, timeout=30)
        self.http.close()


def throughput(url: str, clients: int, duration: float) -> tuple[int, float, float, float]:
    players = [Player(url) for _ in range(clients)]
    stop = time.monotonic() + duration

    def play(i: int) -> None:
        n = 0
        while time.monotonic() < stop:
            players[i].episode((i * 1000 + n) % 500)
            n += 1

    threads = [threading.Thread(target=play, args=(i,)) for i in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    lat = sorted(x for p in players for x in p.latencies)
    for p in players:
        p.close()
    return len(lat), len(lat) / elapsed, statistics.median(lat) * 1e3, lat[int(0.95 * (len(lat) - 1))] * 1e3


def create_reset_latency(url: str, n: int) -> tuple[float, float]:
    http = requests.Session()
    times = []
    for i in range(n):
        began = time.perf_counter()
        env = http.post(url + "/create", timeout=30).json()
        http.post(url + "/reset", json={"env_idx": env, "session_id": i % 500}, timeout=30).raise_for_status()
        times.append(time.perf_counter() - began)
        http.post(url + "/close", json={"env_idx": env}, timeout=30)
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.95 * (n - 1))] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="benchmark this running server instead of starting one")
    parser.add_argument("--clients", default="1,8,32", help="comma-separated client counts (default %(default)s)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per client count (default %(default)s)")
    parser.add_argument("--resets", type=int, default=200, help="create+reset samples (default %(default)s)")
    args = parser.parse_args()
    with (own_server([]) if args.url is None else _given(args.url)) as url:
        rows = [(c, *throughput(url, c, args.duration)) for c in (int(x) for x in args.clients.split(","))]
        p50, p95 = create_reset_latency(url, args.resets)
    print(f"WebShop server at {url}, clients are threads of this process")
    print(describe_cpu(torch_threads=False))
    print(f"{'clients':>7} | {'steps':>7} | {'steps/s':>8} | {'p50 ms':>7} | {'p95 ms':>7}")
    print("-" * 49)
    for clients, steps, rate, s50, s95 in rows:
        print(f"{clients:>7} | {steps:>7} | {rate:>8.0f} | {s50:>7.2f} | {s95:>7.2f}")
    print(f"\ncreate + reset latency over {args.resets} samples: p50 {p50:.2f} ms, p95 {p95:.2f} ms")


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url.rstrip("/")


if __name__ == "__main__":
    main()
