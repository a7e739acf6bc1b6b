"""`GatewayConfig`: the gateway rollout's keys of the trainer's ``agent`` section.

The ``agent`` section is every rollout plugin's free-form config; in a run it also holds the
built-in agent's keys (``env_name``, ``env_ports`` ...), which the gateway ignores.  The keys it
shares with the built-in agent (``n``, the token limits, ``concurrency``, ``seed``) and
``episode_timeout_s`` default to ``ppo_trainer.yaml``'s values; ``program`` is the gateway's own
(``+agent.program=package.module:function`` on the command line).  Its sampling is no key: whoever
builds the gateway hands it in (in training, the rollout engine's, ``actor_rollout_ref.rollout``).

Token budget (the built-in agent's rule): a sample's first prompt holds at most
``max_prompt_length`` tokens; everything after it (model replies, the messages added between
calls, appended end-of-turn tokens) at most ``max_trajectory_length - max_prompt_length``
(`response_budget`); one reply at most ``max_response_length`` tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from verl.utils.imports import load_target
from verl.utils.typed_config import config_fields, handed
from verl.utils.yaml_defaults import yaml_value
from verl.workers.rollout.base import Sampling


def _agent_default(key: str) -> Any:
    return dataclasses.field(default_factory=lambda: yaml_value("ppo_trainer", f"agent.{key}"))


@dataclass
class GatewayConfig:
    """The gateway's keys; `validate` raises ValueError naming the first bad one."""

    program: str  # package.module:function, the agent program that plays one episode
    sampling: Sampling = handed()  # what every call samples with (greedy in validation)
    episode_timeout_s: float = _agent_default("episode_timeout_s")  # an episode running longer is a failed trajectory
    n: int = _agent_default("n")  # episodes per task (the group)
    concurrency: int = _agent_default("concurrency")  # episodes running at once
    max_prompt_length: int = _agent_default("max_prompt_length")
    max_response_length: int = _agent_default("max_response_length")  # per reply
    max_trajectory_length: int = _agent_default("max_trajectory_length")  # per sample: prompt + everything after
    seed: int = _agent_default("seed")

    @classmethod
    def from_section(cls, section: Mapping[str, Any], sampling: Sampling, n: int | None = None) -> "GatewayConfig":
        """The gateway's keys of an ``agent`` section, with ``sampling``; a key neither the gateway nor the
        built-in agent knows is a ValueError (a typo would otherwise be ignored)."""
        from openmanus_rl.agent.config import AgentConfig

        ours = {f.name for f in config_fields(cls)}
        theirs = {f.name for f in config_fields(AgentConfig)}
        unknown = sorted(set(section) - ours - theirs)
        if unknown:
            raise ValueError(f"unknown key(s) {unknown}; the gateway's keys: {sorted(ours)}")
        if "program" not in section:
            raise ValueError("program is required: +agent.program=package.module:function")
        values = {key: section[key] for key in ours if key in section}
        if n is not None:
            values["n"] = n
        return cls(**values, sampling=sampling)

    @property
    def response_budget(self) -> int:
        """Tokens a sample may hold after its first prompt."""
        return self.max_trajectory_length - self.max_prompt_length

    def validate(self) -> None:
        for name in ("n", "concurrency", "max_prompt_length", "max_response_length", "max_trajectory_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.response_budget < self.max_response_length + 1:
            raise ValueError(
                f"max_trajectory_length ({self.max_trajectory_length}) must leave room after "
                f"max_prompt_length ({self.max_prompt_length}) for one reply of max_response_length "
                f"({self.max_response_length}) plus its end-of-turn token"
            )
        if not isinstance(self.episode_timeout_s, (int, float)) or self.episode_timeout_s <= 0:
            raise ValueError(f"episode_timeout_s must be > 0, got {self.episode_timeout_s!r}")
        load_program(self.program)


def load_program(target: str) -> Callable[..., Any]:
    """The function ``package.module:function`` names (`verl.utils.imports.load_target`: imported as under
    ``python -m``, so a script finds the repository's ``examples`` as the trainer does); ValueError when it
    cannot be loaded or called."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"program must be package.module:function, got {target!r}")
    fn = load_target(target, "program")
    if not callable(fn):
        raise ValueError(f"program {target!r} is a {type(fn).__name__}, not a function")
    return fn
