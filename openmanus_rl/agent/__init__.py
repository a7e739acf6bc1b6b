"""The agent: `OpenManusAgent` (batched multi-turn rollouts) and its `AgentConfig`; action templates and chat pieces."""

from .config import AgentConfig
from .openmanus_agent import OpenManusAgent, trajectory_seed, turn_seed
from .templates import (
    ACTION_TEMPLATES,
    ActionTemplate,
    ParsedAction,
    get_action_template,
    register_action_template,
)

__all__ = [
    "ACTION_TEMPLATES",
    "ActionTemplate",
    "AgentConfig",
    "OpenManusAgent",
    "ParsedAction",
    "get_action_template",
    "register_action_template",
    "trajectory_seed",
    "turn_seed",
]
