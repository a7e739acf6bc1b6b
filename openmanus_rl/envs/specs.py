"""The env specs the agent plays by (`agentgym.registry`: one package per env), each tied to its reward module.

Importing this module maps every registered env's ``data_source`` to the reward
module its spec names (`verl.utils.reward_score`); `register_env` does the same
for a spec added later.
"""

from __future__ import annotations

from agentgym import registry
from agentgym.registry import ENV_SPECS, get_env_spec
from agentgym.spec import EnvSpec
from verl.utils.reward_score import register_reward_score

__all__ = ["ENV_SPECS", "EnvSpec", "get_env_spec", "register_env"]


def register_env(spec: EnvSpec, replace: bool = False) -> EnvSpec:
    """`agentgym.registry.register_env`, and ``spec.reward_score`` scores rows whose ``data_source`` is
    ``spec.name``."""
    register_reward_score(spec.reward_score, data_sources=(spec.name,))
    return registry.register_env(spec, replace)


for _spec in ENV_SPECS.values():
    register_reward_score(_spec.reward_score, data_sources=(_spec.name,))
