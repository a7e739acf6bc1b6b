"""Concurrency and memory: many clients on one server, and create/close cycles."""

from __future__ import annotations

import queue
import re
import threading
import time
from typing import Any, Callable, Iterator

import psutil
import pytest
import requests
from webshop_client import Client, shop_for

pytestmark = pytest.mark.slow

THREADS, EPISODES, ENVS = 32, 20, 16


def run_threads(n: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"{len(errors)} threads failed; first: {errors[0]!r}"


def test_32_threads_20_episodes_on_16_envs(server: str, shop: Any) -> None:
    pool: queue.Queue[int] = queue.Queue()
    envs = [Client(server).env_idx for _ in range(ENVS)]
    for env in envs:
        pool.put(env)
    rewards: list[float] = []

    def worker(i: int) -> None:
        for k in range(EPISODES):
            env = pool.get()
            try:
                client = Client(server, env)
                goal = shop.goal((i * EPISODES + k) % 500)
                final = shop_for(client, goal, shop.by_asin[goal.asin])
                rewards.append(final["reward"])
            finally:
                pool.put(env)

    run_threads(THREADS, worker)
    assert rewards == [1.0] * THREADS * EPISODES
    for env in envs:
        Client(server, env).close()


def test_one_env_serialises_concurrent_steps(server: str) -> None:
    c = Client(server)
    c.reset(0)
    assert "(Total results: 50)" in c.step("search[black]")["state"]
    pages: list[int] = []

    def click_next(_: int) -> None:
        state = Client(server, c.env_idx).step("click[next >]")["state"]
        pages.append(int(re.search(r"Page (\d+) \(Total", state).group(1)))

    run_threads(8, click_next)
    # four real page turns (2, 3, 4, 5); the other four found no "Next >" on page 5 and changed nothing
    assert sorted(pages) == [2, 3, 4, 5, 5, 5, 5, 5]
    c.close()


@pytest.fixture(scope="module")
def own_server(start_server: Callable[..., Any]) -> Iterator[Any]:
    with start_server() as url:
        yield url


def test_memory_returns_to_baseline(own_server: Any) -> None:
    proc = psutil.Process(own_server.pid)

    http = requests.Session()

    def cycles(n: int) -> None:
        for i in range(n):
            c = Client(own_server, http=http)
            c.reset(i % 500)
            c.step("search[comfortable running shoes]")
            c.close()

    cycles(100)  # warm up allocator pools and caches
    time.sleep(0.5)
    baseline = proc.memory_info().rss
    cycles(1000)
    time.sleep(0.5)
    grown = proc.memory_info().rss - baseline
    assert Client(own_server).get("/list_envs") == [1100]  # only the env this call just made
    assert grown < 4 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 1,000 create/close cycles"
