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
