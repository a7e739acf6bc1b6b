"""The agent as the engine's rollout plugin: its preflight names a server that is down before any worker starts."""

from types import SimpleNamespace

import pytest

from agentgym.spawn import free_port
from openmanus_rl.agent.plugin import PLUGIN
from verl.utils.typed_config import ConfigError


def test_preflight_names_the_server_that_is_down():
    port = free_port()
    cfg = SimpleNamespace(agent={"env_ports": [port]})
    with pytest.raises(
        ConfigError,
        match=rf"environment server http://127.0.0.1:{port}/ is not answering GET / with \"ok\"; "
        rf"start it with `agentgym serve <env> --port {port}`",
    ):
        PLUGIN.preflight(cfg)


def test_preflight_passes_with_a_healthy_server(server):
    base, port = server.rsplit(":", 1)
    PLUGIN.preflight(SimpleNamespace(agent={"env_server_base": base, "env_ports": [int(port)]}))


def test_response_budget_is_the_trajectory_budget_after_the_prompt():
    cfg = SimpleNamespace(agent={"max_trajectory_length": 3072, "max_prompt_length": 1024})
    assert PLUGIN.response_budget(cfg) == 2048


def test_the_agent_and_the_gateway_sample_as_the_rollout_engine_says():
    """Sampling is set once, under ``actor_rollout_ref.rollout``: both plugins hand that to what they build."""
    from openmanus_rl.agent.plugin import agent_config
    from openmanus_rl.gateway.plugin import gateway_config
    from verl.trainer.ppo.config import load_config
    from verl.workers.rollout.base import Sampling

    rollout = ["actor_rollout_ref.rollout.temperature=0.7", "actor_rollout_ref.rollout.top_p=0.9"]
    cfg = load_config(["actor_rollout_ref.model.path=m", *rollout], check_files=False)
    agent = agent_config(cfg, 4)
    assert (agent.temperature, agent.top_p, agent.top_k, agent.n) == (0.7, 0.9, -1, 4)
    cfg = load_config(
        [
            "actor_rollout_ref.model.path=m",
            "data.rollout=gateway",
            "+agent.program=gateway_helpers:tool_episode",
            *rollout,
        ],
        check_files=False,
    )
    assert gateway_config(cfg).sampling == Sampling(temperature=0.7, top_p=0.9, top_k=-1)


def test_an_agent_not_handed_its_sampling_says_so():
    from openmanus_rl.agent import AgentConfig

    with pytest.raises(ValueError, match=r"^AgentConfig.sampling is not set: hand the agent its sampling"):
        _ = AgentConfig().temperature
