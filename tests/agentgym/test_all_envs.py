"""Every env that has a server, through the same three checks: the agent's own client plays the env's expert on
a test task, memory and open files stay flat over repeated create/reset/close cycles (1,000; 12 where each
env is a JVM, 20 where each reset loads a planned game), and 10,000 random and malformed requests get no 5xx but
the 503 of the env cap."""

from __future__ import annotations

import time
from collections import Counter
from typing import Iterator

import psutil
import pytest
from fuzz import Fuzzer

from agentgym.launcher import ENVS
from agentgym.registry import get_env_spec
from agentgym.spawn import healthy, serve_subprocess
from agentgym.spec import load_object
from openmanus_rl.envs import EnvClient, RetryPolicy

pytestmark = pytest.mark.slow

JVM_ENVS = {"sciworld"}  # an env is a JVM: slow to create, so fewer cycles and no closing while fuzzing
SERVER_ARGS = {"sciworld": ["--max-envs", "2"]}
FUZZ_REQUESTS = 10_000
VALID_TASK_SHARE = {
    "alfworld": 0.03,
    "sciworld": 0.1,
}  # a real reset loads a game into ALFWorld's engine (0.5-2 s) or a task into a JVM
# A JVM per env (3 s to start) and a planned game per reset (1-2 s) make cycles dear there: fewer cycles, and a leaked
# env shows anyway in the server's open files (a py4j gateway holds sockets, a game its files). Threads are not
# counted: the server's worker-thread pool grows and shrinks with request timing
MEMORY_CYCLES = {"sciworld": 12, "alfworld": 20}
MEMORY_SLACK_MB = {"sciworld": 40.0}  # py4j keeps some per-gateway state; a leak of one JVM would be ~100 MB
DEFAULT_CYCLES, DEFAULT_SLACK_MB, WARMUP = 1000, 15.0, 20
# ALFWorld's first load of each game grows the server by ~0.6 MB: the warm-up loads every game the cycles will, once
WARMUP_CYCLES = {"sciworld": 4, "alfworld": 20}


KNOWN = ["alfworld", "babyai", "frozenlake", "maze", "sciworld", "sokoban", "textcraft", "webshop", "wordle"]


def test_every_env_with_a_task_list_and_an_expert_has_a_server() -> None:
    assert set(KNOWN) <= set(ENVS)  # a new env package joins every check below without an edit here
    for name in ENVS:
        spec = get_env_spec(name)
        assert spec.tasks and spec.expert and spec.splits, name


def first_test_ids(name: str) -> list[int]:
    return [task_id for task_id, _ in load_object(get_env_spec(name).tasks)("test")]


@pytest.fixture(scope="module", params=sorted(ENVS))
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """One server per env for the three checks, which run in this file's order: the fuzzing, which leaves envs open,
    comes last."""
    name = request.param
    with serve_subprocess(name, timeout_s=120, args=SERVER_ARGS.get(name, [])) as url:
        yield name, url


def test_the_agents_client_plays_the_expert_on_a_test_task(server: tuple[str, str]) -> None:
    from openmanus_rl.experts import evaluate_expert

    name, url = server
    first = first_test_ids(name)[0]
    score = evaluate_expert(name, "test", 1, url, task_ids=[first], max_turns=100, request_timeout_s=120)
    assert (score.n, score.successes) == (1, [True]), (name, score.summary())
    client = EnvClient(get_env_spec(name), url, RetryPolicy(120, 0, 0.1))
    client.create()
    assert client.reset(first).strip()
    client.close()


def test_memory_stays_flat_over_create_reset_close_cycles(server: tuple[str, str]) -> None:
    name, url = server
    spec = get_env_spec(name)
    ids = first_test_ids(name)
    process = psutil.Process(url.pid)

    def cycles(n: int) -> None:
        for i in range(n):
            client = EnvClient(spec, url, RetryPolicy(120, 0, 0.1))
            client.create()
            client.reset(ids[i % len(ids)])
            client.close()

    cycles(WARMUP_CYCLES.get(name, WARMUP))
    rss, fds = process.memory_info().rss, process.num_fds()
    cycles(MEMORY_CYCLES.get(name, DEFAULT_CYCLES))
    grown_mb = (process.memory_info().rss - rss) / 2**20
    assert grown_mb < MEMORY_SLACK_MB.get(name, DEFAULT_SLACK_MB), (name, grown_mb)
    settled = time.monotonic() + 10  # the server closes a finished client's socket when it sees the client hang up
    while process.num_fds() > fds and time.monotonic() < settled:
        time.sleep(0.2)
    assert process.num_fds() <= fds, (name, "open files before and after the cycles", fds, process.num_fds())
    assert [p.name() for p in process.children(recursive=True)] == []  # no env (JVM) left behind


def test_random_and_malformed_requests_get_no_5xx_but_503(server: tuple[str, str]) -> None:
    name, url = server
    fuzzer = Fuzzer(
        get_env_spec(name),
        url,
        seed=7,
        task_ids=first_test_ids(name)[:50],
        close_known=name not in JVM_ENVS,
        valid_task_share=VALID_TASK_SHARE.get(name, 0.6),
    )
    statuses: Counter[int] = Counter()
    bad = []
    for _ in range(FUZZ_REQUESTS):
        outcome = fuzzer.one()
        statuses[outcome.status] += 1
        if outcome.status >= 500 and outcome.status != 503:
            bad.append(outcome)
    assert not bad, f"{name}: {len(bad)} requests answered 5xx, e.g. {bad[:3]}"
    assert healthy(url)
    assert statuses[200] > 1000 and sum(n for s, n in statuses.items() if 400 <= s < 500) > 1000, (name, statuses)
