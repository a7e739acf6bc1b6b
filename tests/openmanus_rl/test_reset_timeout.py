"""An env's ``/reset`` may wait longer than the request timeout (`EnvSpec.reset_timeout_s`: ALFWorld loads its games
one at a time), and the trainer's supervisor does not take such a queue of resets for a hung server."""

from openmanus_rl.agent import AgentConfig
from openmanus_rl.agent.plugin import stuck_request_s
from openmanus_rl.envs import EnvClient, RetryPolicy, get_env_spec


def test_a_reset_waits_the_larger_of_the_request_timeout_and_the_envs_own():
    alfworld, webshop = get_env_spec("alfworld"), get_env_spec("webshop")
    assert (alfworld.reset_timeout_s, webshop.reset_timeout_s) == (180.0, None)
    assert EnvClient(alfworld, "http://127.0.0.1:1", RetryPolicy(timeout_s=30.0)).reset_timeout_s == 180.0
    assert EnvClient(alfworld, "http://127.0.0.1:1", RetryPolicy(timeout_s=300.0)).reset_timeout_s == 300.0
    assert EnvClient(webshop, "http://127.0.0.1:1", RetryPolicy(timeout_s=30.0)).reset_timeout_s == 30.0


def test_a_queue_of_resets_is_not_a_hang():
    agent = AgentConfig(server_hang_s=60.0, request_timeout_s=30.0)
    assert (stuck_request_s(agent, "webshop"), stuck_request_s(agent, "alfworld")) == (60.0, 180.0)
    assert stuck_request_s(AgentConfig(server_hang_s=10.0, request_timeout_s=45.0), "webshop") == 45.0
