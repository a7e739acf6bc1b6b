"""The gateway as the trainer's rollout (``data.rollout=gateway``, a ``verl.rollouts`` entry point).

``+agent.program=package.module:function`` names the agent program (`episodes`); the rest of its
keys are `GatewayConfig`'s.  Sampling is the rollout engine's, handed in (``actor_rollout_ref.rollout``:
one setting drives sampling and log-prob recomputation), as to the built-in agent.  Importing this
module registers the ``gateway`` reward module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl.trainer.ppo.rollout import RolloutPlugin

from .config import GatewayConfig
from .episodes import plain
from .rollout import GatewayRollout


def gateway_config(cfg: Any, n: int | None = None) -> GatewayConfig:
    """The ``agent`` section's gateway keys (``n`` rollouts per task, if given), handed the rollout engine's
    sampling."""
    return GatewayConfig.from_section(plain(cfg.agent), cfg.actor_rollout_ref.rollout.sampling, n)


def _build(cfg: Any, tokenizer: Any, generator: Any, n: int) -> GatewayRollout:
    model = Path(str(cfg.actor_rollout_ref.model.path)).name or "policy"
    return GatewayRollout(tokenizer, generator, gateway_config(cfg, n), cfg.algorithm.reward_score_fn, model)


def _validate(cfg: Any) -> None:
    """The section's keys (`GatewayConfig.validate`, the program loads)."""
    gateway_config(cfg).validate()


PLUGIN = RolloutPlugin(
    build=_build, validate=_validate, response_budget=lambda cfg: gateway_config(cfg).response_budget
)
