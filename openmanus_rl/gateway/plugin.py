"""The gateway as the trainer's rollout (``data.rollout=gateway``, a ``verl.rollouts`` entry point).

``+agent.program=package.module:function`` names the agent program (`episodes`); the rest of its
keys are `GatewayConfig`'s.  Sampling is the rollout engine's: the section's temperature, top_p and
top_k must agree with ``actor_rollout_ref.rollout``'s (one setting drives sampling and log-prob
recomputation), as the built-in agent checks.  Importing this module registers the ``gateway``
reward module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl.trainer.ppo.rollout import RolloutPlugin

from ..agent.config import check_sampling_agrees
from .config import GatewayConfig
from .episodes import plain
from .rollout import GatewayRollout


def _config(cfg: Any, n: int | None = None) -> GatewayConfig:
    return GatewayConfig.from_section(plain(cfg.agent), n)


def _build(cfg: Any, tokenizer: Any, generator: Any, n: int) -> GatewayRollout:
    model = Path(str(cfg.actor_rollout_ref.model.path)).name or "policy"
    return GatewayRollout(tokenizer, generator, _config(cfg, n), cfg.algorithm.reward_score_fn, model)


def _validate(cfg: Any) -> None:
    """The section's keys (`GatewayConfig.validate`, the program loads), then sampling agrees with the engine's."""
    config = _config(cfg)
    config.validate()
    check_sampling_agrees(config, cfg.actor_rollout_ref.rollout)


PLUGIN = RolloutPlugin(build=_build, validate=_validate, response_budget=lambda cfg: _config(cfg).response_budget)
