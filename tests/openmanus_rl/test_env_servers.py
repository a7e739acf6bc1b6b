"""``agent.env_servers``: env servers on any host, spread over like local ports,
never started or restarted by the run."""

import time
from collections import Counter
from types import SimpleNamespace

import pytest
import requests
from agent_helpers import PLAIN, ScriptedGenerator, task_batch, text_policy

from agentgym.spawn import free_port
from openmanus_rl.agent import AgentConfig, OpenManusAgent
from openmanus_rl.agent.plugin import PLUGIN
from openmanus_rl.envs.remote import ServerWatch, probe
from openmanus_rl.envs.supervisor import SupervisorGroup
from verl.utils.typed_config import ConfigError

URL_HINT = "(http:// or https://, a host, an optional port: http://10.0.0.5:36001)"


@pytest.mark.parametrize(
    "env_servers, message",
    [
        (
            ["http://10.0.0.5:36001"],
            "env_servers must map env names to lists of server URLs "
            "({webshop: [http://10.0.0.5:36001]}), got ['http://10.0.0.5:36001']",
        ),
        (
            {"webshop": "http://10.0.0.5:36001"},
            "env_servers.webshop must be a non-empty list of server URLs, got 'http://10.0.0.5:36001'",
        ),
        ({"webshop": []}, "env_servers.webshop must be a non-empty list of server URLs, got []"),
        ({"maze": ["http://10.0.0.5:36001"]}, "env_servers.maze: 'maze' is not an env of env_name 'webshop'"),
        ({"webshop": ["10.0.0.5:36001"]}, f"env_servers.webshop: '10.0.0.5:36001' is not a server URL {URL_HINT}"),
        ({"webshop": ["http://:36001"]}, f"env_servers.webshop: 'http://:36001' is not a server URL {URL_HINT}"),
        (
            {"webshop": ["http://10.0.0.5:99999"]},
            f"env_servers.webshop: 'http://10.0.0.5:99999' is not a server URL {URL_HINT}",
        ),
        (
            {"webshop": ["http://10.0.0.5:36001", "http://10.0.0.5:36001/"]},
            "webshop server http://10.0.0.5:36001 is listed twice (env_server_base + env_ports, env_servers)",
        ),
    ],
)
def test_a_malformed_entry_is_named(env_servers, message):
    with pytest.raises(ValueError) as raised:
        AgentConfig(env_servers=env_servers).validate()
    assert str(raised.value) == message


def test_ports_may_be_empty_only_when_every_env_lists_servers():
    only_remote = AgentConfig(
        env_name="babyai,webshop",
        env_ports=[],
        env_servers={"babyai": ["http://10.0.0.5:36001"], "webshop": ["https://shop.lan/"]},
    )
    only_remote.validate()
    assert only_remote.servers_by_env() == {"babyai": ["http://10.0.0.5:36001"], "webshop": ["https://shop.lan"]}
    with pytest.raises(ValueError) as raised:
        AgentConfig(
            env_name="babyai,webshop", env_ports=[], env_servers={"webshop": ["http://10.0.0.5:36001"]}
        ).validate()
    assert str(raised.value) == (
        "env_ports must be a non-empty list of ports (1..65535; [] only when env_servers lists every env), got []"
    )


def test_an_env_may_have_local_ports_and_listed_servers():
    both = AgentConfig(env_ports=[36001, 36002], env_servers={"webshop": ["http://10.0.0.5:36001"]})
    both.validate()
    assert both.servers_by_env() == {
        "webshop": ["http://127.0.0.1:36001", "http://127.0.0.1:36002", "http://10.0.0.5:36001"]
    }
    assert AgentConfig().servers_by_env() == {"webshop": ["http://127.0.0.1:36001"]}


def test_preflight_names_every_listed_server_that_does_not_answer(webshop_server):
    dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    cfg = SimpleNamespace(
        agent={"env_ports": [], "env_servers": {"webshop": [dead[0], webshop_server.url, dead[1] + "/"]}}
    )
    with pytest.raises(ConfigError) as raised:
        PLUGIN.preflight(cfg)
    assert str(raised.value) == (
        f'agent.env_servers: 2 of 3 servers do not answer GET / with "ok": {dead[0]} (Connection refused); '
        f"{dead[1]} (Connection refused). Start them on their hosts (the run never starts a listed server) "
        f"or drop them from the list"
    )
    PLUGIN.preflight(SimpleNamespace(agent={"env_ports": [], "env_servers": {"webshop": [webshop_server.url]}}))


def open_envs(url: str) -> int:
    return requests.get(url + "/health", timeout=5).json()["open"]


@pytest.mark.slow
def test_rollouts_spread_over_listed_servers_and_skip_a_dead_one_that_is_never_restarted(
    tokenizer, spawn_server, tmp_path
):
    a, b = spawn_server("webshop"), spawn_server("webshop")
    cfg = {
        "env_ports": [],
        "env_servers": {"webshop": [a.url, b.url]},
        "manage_servers": True,
        "max_turns": 2,
        "max_response_length": 32,
        "max_obs_length": 64,
        "env_retries": 0,
        "env_cooldown_s": 1.0,
        "sampling": PLAIN,
    }
    services = PLUGIN.start(SimpleNamespace(agent=cfg), tmp_path)
    policy = text_policy(tokenizer, lambda prompt: "Thought: look around\nAction: search[cotton shirt]")
    try:
        assert services.supervisors == [] and services.watch.urls == {"webshop": [a.url, b.url]}
        with OpenManusAgent(tokenizer, ScriptedGenerator(policy), cfg) as agent:
            out = agent.run_llm_loop(task_batch([0, 1, 2, 3]))
            assert Counter(out.non_tensor_batch["env_server"]) == {a.url: 2, b.url: 2}
            assert (open_envs(a.url), open_envs(b.url)) == (2, 2)  # each server created the envs of its two episodes

            b.kill()
            pool, errors = agent.envs["webshop"].pool, []
            for tasks in ([4, 5, 6, 7], [8, 9, 10, 11]):
                again = agent.run_llm_loop(task_batch(tasks))
                assert list(again.non_tensor_batch["env_server"]) == [a.url] * 4
                assert not any(again.non_tensor_batch["failed"])
                errors.append(pool.stats["errors"])
                time.sleep(1.1)  # b's cool-down ends: the next batch tries it again, then goes to a
            assert errors[1] > errors[0] > 0 and open_envs(a.url) == 4
        assert services.wait_ready(5) is None  # a answers
        assert (b.exit_code(), probe(b.url)) == (-9, "Connection refused")  # not restarted by us

        a.kill()
        assert services.wait_ready(1.0) == (
            f'every webshop server is gone (none answered GET / with "ok" for 1 s): {a.url} (Connection refused); '
            f"{b.url} (Connection refused). The run never starts or restarts the servers listed in agent.env_servers: "
            "bring one back, then re-run to resume"
        )
    finally:
        services.close()


def test_the_watch_names_a_gone_server_and_sees_it_back(spawn_server):
    server = spawn_server("webshop")
    watch = ServerWatch({"webshop": [server.url]}, poll_s=0.2)
    assert watch.wait_ready(5) is None
    server.kill()
    assert watch.wait_ready(0.5) == (
        f'every webshop server is gone (none answered GET / with "ok" for 0.5 s): {server.url} (Connection refused). '
        "The run never starts or restarts the servers listed in agent.env_servers: "
        "bring one back, then re-run to resume"
    )
    server.start()  # brought back by whoever runs it, on its port
    assert watch.wait_ready(5) is None


def test_an_env_with_listed_servers_is_gone_only_when_none_of_its_servers_answers(webshop_server):
    local_given_up = SimpleNamespace(env="webshop", wait_ready=lambda timeout_s: "webshop server on port 36001 is down")
    babyai_given_up = SimpleNamespace(env="babyai", wait_ready=lambda timeout_s: "babyai server on port 36002 is down")
    watch = ServerWatch({"webshop": [f"http://127.0.0.1:{free_port()}", webshop_server.url]})
    assert SupervisorGroup([local_given_up], watch).wait_ready(5) is None  # the listed server still answers
    assert (
        SupervisorGroup([local_given_up, babyai_given_up], watch).wait_ready(5) == "babyai server on port 36002 is down"
    )
