"""The default reward of every env's rows (registered as ``agentgym``): what the episode paid.

The agent turns an episode into a composed reward (goal, length and format
components, `RewardComposer`) and reports it as ``reward_total``; this reward
module returns it, and the trainer's reward path allocates it over the model's tokens.
Each `EnvSpec` names its reward module (``reward_score``), so an env can bring its own.
"""

from __future__ import annotations

from typing import Any


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    """``extra_info["reward_total"]``: the agent's composed reward for the trajectory."""
    if not extra_info or "reward_total" not in extra_info:
        raise ValueError(f"agentgym reward for '{data_source}' needs extra_info['reward_total'] from the agent rollout")
    return float(extra_info["reward_total"])
