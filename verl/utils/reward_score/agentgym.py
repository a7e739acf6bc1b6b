"""The default reward for agent runs: what the environment (and the agent's reward composer) paid.

The agent already turned the episode into a composed reward (goal, length,
format components) and allocated it over the model's tokens; this function
returns that total so the trainer keeps the agent's token-level allocation.
"""

from __future__ import annotations

from typing import Any


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    """``extra_info["reward_total"]``: the agent's composed reward for the trajectory."""
    if not extra_info or "reward_total" not in extra_info:
        raise ValueError(f"agentgym reward for '{data_source}' needs extra_info['reward_total'] from the agent rollout")
    return float(extra_info["reward_total"])
