"""Env clients and the pool against real server processes: our WebShop (family A) and the toy family-B server."""

import logging
import threading
import time

import pytest
import requests

from agentgym.spawn import free_port
from openmanus_rl.envs import (
    EnvCapacityError,
    EnvClient,
    EnvConnectionError,
    EnvPool,
    EnvRequestError,
    EnvServerError,
    EnvTimeoutError,
    NoEnvServerError,
    RetryPolicy,
    ServerAddresses,
    get_env_spec,
)

pytestmark = pytest.mark.slow

WEBSHOP, MAZE = get_env_spec("webshop"), get_env_spec("maze")
FAST = RetryPolicy(timeout_s=5.0, retries=2, backoff_s=0.1)


def test_family_a_episode_and_close(webshop_server, shop):
    client = EnvClient(WEBSHOP, webshop_server.url, FAST)
    env_id = client.create()
    assert isinstance(env_id, int) and client.env_id == env_id
    first = client.reset(3)
    assert first == f"WebShop [SEP] Instruction: [SEP] {shop.goal(3).instruction} [SEP] Search"
    result = client.step("search[casual dress]")
    assert (result.reward, result.done, result.info) == (0.0, False, None)
    assert result.observation.startswith(f"Instruction: [SEP] {shop.goal(3).instruction} [SEP] Back to Search")
    assert client.observe() == result.observation
    assert env_id in requests.get(webshop_server.url + "/list_envs", timeout=5).json()
    client.close()
    assert env_id not in requests.get(webshop_server.url + "/list_envs", timeout=5).json()
    assert client.env_id is None


def test_family_a_refusals_are_typed(webshop_server):
    ghost = EnvClient(WEBSHOP, webshop_server.url, FAST)
    ghost.env_id = 10**9
    with pytest.raises(EnvRequestError, match="HTTP 404: unknown env_idx 1000000000") as info:
        ghost.step("search[x]")
    assert info.value.status == 404
    client = EnvClient(WEBSHOP, webshop_server.url, FAST)
    client.create()
    client.reset(0)
    with pytest.raises(EnvRequestError, match="HTTP 422") as info:
        client.step("x" * 5000)  # longer than the server's action limit
    assert info.value.status == 422
    client.close()


def test_family_b_with_path_prefix_and_error_bodies(spawn_server):
    server = spawn_server("toy", "--prefix", "/maze", "--reset-field", "game")
    client = EnvClient(MAZE, server.url, FAST)
    assert client.create() == 0  # {"id": 0}
    assert client.reset(4) == "Task 4: value 0."
    assert client.step("add 2").observation == "value 2"
    final = client.step("add 2")
    assert (final.observation, final.reward, final.done) == ("value 4", 1.0, True)
    with pytest.raises(EnvRequestError, match="the episode is finished") as info:  # HTTP 200 {"error": ...}
        client.step("add 1")
    assert info.value.status == 200
    assert requests.get(server.url + "/maze/debug/resets", timeout=5).json() == [[0, 4]]  # "game": 4 reached the env
    client.close()
    assert requests.get(server.url + "/maze/list_envs", timeout=5).json() == []


def test_upstream_server_without_close_is_tolerated(spawn_server, caplog):
    server = spawn_server("toy", "--no-close")
    client = EnvClient(get_env_spec("babyai"), server.url, FAST)
    client.create()
    with caplog.at_level(logging.WARNING):
        client.close()  # 404 from the server: nothing to close there, no warning
    assert caplog.records == [] and client.env_id is None


def test_connection_refused_is_retried_with_backoff():
    client = EnvClient(WEBSHOP, f"http://127.0.0.1:{free_port()}", FAST)
    start = time.monotonic()
    with pytest.raises(EnvConnectionError, match=r"connection failed .*\(after 3 attempts\)"):
        client.create()
    assert time.monotonic() - start >= 0.1 + 0.2  # backoff 0.1 * 2**0 + 0.1 * 2**1


def test_server_errors_are_retried_then_typed_and_a_full_server_is_waited_for(spawn_server):
    server = spawn_server("webshop", "--max-envs", "1")
    first = EnvClient(WEBSHOP, server.url, FAST)
    first.create()
    start = time.monotonic()
    with pytest.raises(EnvServerError, match=r"HTTP 503: env cap reached.*\(after 3 attempts\)") as info:
        EnvClient(WEBSHOP, server.url, FAST).http.call("POST", "/create")  # any 5xx: 1 + 2 retries
    assert info.value.status == 503 and time.monotonic() - start >= 0.1 + 0.2

    # create() waits for room: pauses of 0.1 s, 0.2 s, then 0.4 s would pass the 0.5 s it may wait
    start = time.monotonic()
    with pytest.raises(
        EnvCapacityError, match=r"/create: the server stayed at its env cap \(HTTP 503\) for 0.5s"
    ) as info:
        EnvClient(WEBSHOP, server.url, FAST).create(capacity_wait_s=0.5)
    assert info.value.status == 503 and 0.3 <= time.monotonic() - start < 0.5
    waiting = EnvClient(WEBSHOP, server.url, FAST)
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(waiting.create()))  # waits up to the request timeout (5 s)
    start = time.monotonic()
    thread.start()
    time.sleep(1.0)
    assert got == []
    first.close()  # room again
    thread.join(timeout=10)
    assert len(got) == 1 and isinstance(got[0], int) and 1.0 <= time.monotonic() - start < 4.0
    waiting.close()


def test_pool_skips_a_full_server_without_a_cooldown(spawn_server):
    full, free = spawn_server("webshop", "--max-envs", "1"), spawn_server("webshop", "--max-envs", "1")
    pool = EnvPool(WEBSHOP, [full.url, free.url], RetryPolicy(timeout_s=1.0, retries=2, backoff_s=0.1))
    holder = EnvClient(WEBSHOP, full.url, FAST)
    holder.create()
    client, observation = pool.start_episode(0)  # the full server first (least leased, listed first), then the other
    assert client.server_url == free.url and "Instruction:" in observation
    with pytest.raises(NoEnvServerError, match=r"no webshop server could start an episode: .*stayed at its env cap"):
        pool.start_episode(1)  # both full now
    assert pool.stats["errors"] == 3 and pool._down_until == [0.0, 0.0]  # healthy servers: no cooldown
    holder.close()
    again, _ = pool.start_episode(1)
    assert again.server_url == full.url
    for c in (client, again):
        pool.release(c)
    pool.close()


def test_hung_server_times_out_and_steps_are_not_retried(spawn_server):
    server = spawn_server("webshop")
    policy = RetryPolicy(timeout_s=1.0, retries=2, backoff_s=0.1)
    client = EnvClient(WEBSHOP, server.url, policy)
    client.create()
    client.reset(0)
    server.pause()
    try:
        start = time.monotonic()
        with pytest.raises(EnvTimeoutError, match="no answer within 1s"):
            client.step("search[x]")
        assert 1.0 <= time.monotonic() - start < 1.9  # one attempt: a step may have been applied
        start = time.monotonic()
        with pytest.raises(EnvTimeoutError, match=r"\(after 3 attempts\)"):
            client.observe()  # a GET is safe to repeat
        assert time.monotonic() - start >= 3 * 1.0 + 0.1 + 0.2
    finally:
        server.resume()
    client.close(notify=False)
    server.stop()


def test_pool_balances_reuses_and_closes(spawn_server):
    a, b = spawn_server("toy"), spawn_server("toy")
    spec = get_env_spec("babyai")
    pool = EnvPool(spec, [a.url, b.url], FAST)
    episodes = [pool.start_episode(task) for task in (1, 2, 3, 4)]
    assert [obs for _, obs in episodes] == [
        "Task 1: value 0.",
        "Task 2: value 0.",
        "Task 3: value 0.",
        "Task 4: value 0.",
    ]
    assert [c.server_url for c, _ in episodes] == [a.url, b.url, a.url, b.url]  # least leased, ties to the first
    assert pool.leased() == {a.url: 2, b.url: 2}
    for client, _ in episodes:
        pool.release(client)
    again, _ = pool.start_episode(9)
    assert again is episodes[2][0] and pool.stats["reused"] == 1  # idle env reset, not a new create
    pool.release(again)
    assert pool.stats["created"] == 4 and pool.idle() == {a.url: 2, b.url: 2}
    pool.close()
    assert requests.get(a.url + "/list_envs", timeout=5).json() == []
    assert requests.get(b.url + "/list_envs", timeout=5).json() == []
    assert requests.get(a.url + "/debug/resets", timeout=5).json() == [[0, 1], [1, 3], [1, 9]]


def test_pool_fails_over_skips_a_dead_server_and_takes_it_back(spawn_server):
    live, dead = spawn_server("toy"), spawn_server("toy")
    dead.kill()
    pool = EnvPool(
        get_env_spec("babyai"),
        [dead.url, live.url],
        RetryPolicy(timeout_s=2.0, retries=0, backoff_s=0.0),
        cooldown_s=1.0,
    )
    client, obs = pool.start_episode(5)
    assert (client.server_url, obs) == (live.url, "Task 5: value 0.")
    assert pool.stats["errors"] == 1  # the refused create on the dead server
    second, _ = pool.start_episode(6)
    assert second.server_url == live.url and pool.stats["errors"] == 1  # on cooldown: not even tried
    dead.start()  # restarted on the same port
    time.sleep(1.1)
    third, _ = pool.start_episode(7)
    assert third.server_url == dead.url  # cooldown over, least loaded: back in rotation
    for c in (client, second, third):
        pool.release(c)
    pool.close()


def test_pool_follows_a_server_that_moved_to_another_port(spawn_server):
    old, new = spawn_server("toy"), spawn_server("toy")
    addresses = ServerAddresses()
    pool = EnvPool(get_env_spec("babyai"), [old.url], FAST, addresses=addresses)
    leased, _ = pool.start_episode(1)
    idle, _ = pool.start_episode(2)
    pool.release(idle)
    assert (leased.server_url, pool.idle()) == (old.url, {old.url: 1})
    addresses.move(old.url, new.url)  # as the supervisor records a server it restarted on another port
    moved, obs = pool.start_episode(3)
    assert (moved.server_url, obs, pool.urls) == (new.url, "Task 3: value 0.", [new.url])
    assert pool.stats["reused"] == 0 and pool.stats["created"] == 3  # the idle env at the old address was dropped
    pool.release(leased)  # leased at the old address: dropped, no /close sent to whatever holds that port now
    assert pool.leased() == {new.url: 1} and pool.idle() == {new.url: 0}
    assert requests.get(old.url + "/list_envs", timeout=5).json() == [0, 1]
    pool.release(moved)
    pool.close()
    assert requests.get(new.url + "/list_envs", timeout=5).json() == []


def test_the_preflight_asks_a_server_where_the_address_book_says_it_answers(spawn_server):
    from openmanus_rl.envs.pool import check_servers

    real = spawn_server("toy")
    nowhere = free_port()  # configured there; answering at the real server (as a server started on another node)
    addresses = ServerAddresses()
    with pytest.raises(ConnectionError, match=rf"environment server http://127.0.0.1:{nowhere}/ is not answering"):
        check_servers("http://127.0.0.1", [nowhere], addresses)
    addresses.move(f"http://127.0.0.1:{nowhere}", real.url)
    check_servers("http://127.0.0.1/", [nowhere], addresses)


def test_pool_replaces_an_idle_env_the_server_closed_for_idleness(spawn_server):
    server = spawn_server("webshop", "--idle-timeout-s", "0.5")
    pool = EnvPool(WEBSHOP, [server.url], FAST)
    first, _ = pool.start_episode(1)
    pool.release(first)
    time.sleep(0.8)  # the idle env expires on the server
    second, obs = pool.start_episode(2)
    assert second is not first and obs.startswith("WebShop [SEP] Instruction: [SEP] ")
    assert (pool.stats["created"], pool.stats["reused"], pool.stats["expired"]) == (2, 1, 1)
    assert pool.stats["errors"] == 0 and pool.stats["stale"] == 0
    pool.release(second)
    pool.close()
    assert requests.get(server.url + "/list_envs", timeout=5).json() == []


def test_pool_with_no_reachable_server():
    pool = EnvPool(
        WEBSHOP, [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"], RetryPolicy(2.0, 0, 0.0)
    )
    with pytest.raises(NoEnvServerError, match="no webshop server could start an episode"):
        pool.start_episode(0)
    assert pool.leased() == dict.fromkeys(pool.urls, 0)
