"""`ServerSupervisor` on real env servers (TextCraft, which starts in about a second): a server whose env route hangs
while its health check answers is found by its oldest in-flight request and restarted; a server whose port another
process took while it was down comes back on a free port, and a client pool sharing the supervisor's address book
follows it. The hang is the servers' test-only fault injection (``AGENTGYM_FAULT_INJECTION=1``, ``POST /debug/hang``);
the same faults in a real training run: tests/drills/test_drills.py."""

from __future__ import annotations

import os
import re
import signal
import socket
from pathlib import Path

import psutil
import pytest
import requests
from waiting import wait_until

from agentgym.server import FAULT_INJECTION_ENV
from agentgym.spawn import free_port
from openmanus_rl.envs import EnvPool, RetryPolicy, ServerAddresses, get_env_spec
from openmanus_rl.envs.supervisor import ServerSupervisor, port_free

FAST = RetryPolicy(timeout_s=5.0, retries=0, backoff_s=0.1)


def test_a_server_whose_env_route_hangs_while_it_answers_is_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(FAULT_INJECTION_ENV, "1")  # the supervisor's servers inherit it
    port = free_port()
    supervisor = ServerSupervisor(
        "textcraft", [port], tmp_path, backoff_s=0.1, hang_s=1.5, poll_s=0.2, addresses=ServerAddresses()
    ).start()
    url = f"http://127.0.0.1:{port}"
    try:
        pid = int(re.search(r"started \(pid (\d+)\)", capsys.readouterr().out).group(1))
        assert requests.post(url + "/debug/hang", timeout=5).json() is True
        with pytest.raises(requests.Timeout):
            requests.post(url + "/create", timeout=0.5)  # the env route hangs...
        assert requests.get(url + "/", timeout=5).json() == "ok"  # ...while GET / answers
        health = requests.get(url + "/health", timeout=5).json()
        assert health["in_flight"] == 1 and 0.3 <= health["oldest_request_s"] < 1.5
        assert supervisor.wait_ready(0.3) == (
            "no textcraft server could serve within 0.3 s (none answered its health "
            "check without an env call hanging from before)"
        )

        wait_until(lambda: supervisor.metrics()["env_server/restarts"] == 1.0, "the restart")
        out = capsys.readouterr().out
        assert re.search(
            rf"textcraft server on port {port} has had an env request in flight for \d+ s while its "
            r"health check answered \(an env route hung\); killed it; restarting in 0.1 s "
            r"\(attempt 1 of 3\)",
            out,
        ), out
        assert re.search(rf"textcraft server on port {port} is back \(pid \d+, restart 1\)", out), out
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert supervisor.wait_ready(5) is None
        env = requests.post(url + "/create", timeout=5).json()  # a fresh server: its env routes answer
        assert requests.post(url + "/close", json={"id": env["id"]}, timeout=5).json() is True
    finally:
        supervisor.close()


def test_a_port_taken_before_the_start_moves_the_server_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A configured port another process holds (a stray server, or a client's ephemeral port taken between choosing
    the port and binding it) starts the server on a free port, recorded for the agent, instead of failing the run."""
    port, addresses = free_port(), ServerAddresses()
    home = f"http://127.0.0.1:{port}"
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", port))
    blocker.listen(8)
    supervisor = ServerSupervisor("textcraft", [port], tmp_path, addresses=addresses)
    try:
        supervisor.start()
        out = capsys.readouterr().out
        moved = re.search(
            rf"textcraft server on port {port}: the port is taken by another process; starting on "
            r"port (\d+) \(the agent now uses http://127.0.0.1:(\d+)\)",
            out,
        )
        assert moved and moved.group(1) == moved.group(2) != str(port), out
        assert addresses.resolve(home) == f"http://127.0.0.1:{moved.group(1)}" and supervisor.wait_ready(5) is None
        assert supervisor.homes() == [home]  # the agent's name for it stays the configured URL
    finally:
        supervisor.close()
        blocker.close()


def test_a_taken_port_moves_the_server_to_a_free_one_and_the_pool_follows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, addresses = free_port(), ServerAddresses()
    home = f"http://127.0.0.1:{port}"
    supervisor = ServerSupervisor("textcraft", [port], tmp_path, backoff_s=0.5, poll_s=0.2, addresses=addresses).start()
    pool = EnvPool(get_env_spec("textcraft"), [home], FAST, addresses=addresses)
    blocker = socket.socket()
    try:
        client, _ = pool.start_episode(3)
        pool.release(client)
        pid = int(re.search(r"started \(pid (\d+)\)", capsys.readouterr().out).group(1))
        os.kill(pid, signal.SIGKILL)
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        wait_until(lambda: port_free(port), "the killed server's port")  # (the supervisor reaps its child)
        blocker.bind(("127.0.0.1", port))  # another process holds the port now
        blocker.listen(8)

        wait_until(lambda: supervisor.metrics()["env_server/restarts"] == 1.0, "the restart")
        out = capsys.readouterr().out
        moved = re.search(
            rf"textcraft server on port {port}: the port is taken by another process; restarting on "
            r"port (\d+) \(the agent now uses http://127.0.0.1:(\d+)\)",
            out,
        )
        assert moved and moved.group(1) == moved.group(2), out
        new_url = f"http://127.0.0.1:{moved.group(1)}"
        assert f"textcraft server on port {port} exited with code -9; restarting in 0.5 s (attempt 1 of 3)" in out
        assert re.search(rf"textcraft server on port {moved.group(1)} is back \(pid \d+, restart 1\)", out), out
        assert addresses.resolve(home) == new_url and supervisor.wait_ready(5) is None

        client, observation = pool.start_episode(4)  # the pool now sends new envs to the new port
        assert client.server_url == new_url and "Goal: craft" in observation
        assert pool.urls == [new_url] and pool.stats["reused"] == 0
        pool.release(client)
    finally:
        pool.close()
        blocker.close()
        supervisor.close()
    assert addresses.resolve(home) == home  # a closed supervisor forgets its moves
