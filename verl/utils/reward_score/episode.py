"""The default reward of every env's rows (registered as ``episode``): what the episode paid.

The env scores the episode (its own rule, e.g. WebShop's attribute/option/price match);
the agent composes that with its length and format components (`openmanus_rl.rewards.RewardComposer`)
and reports the weighted total as ``extra_info["reward_total"]``; this module returns it.
Each `EnvSpec` names its reward module (``reward_score``), so an env can bring another one.
"""

from __future__ import annotations

from typing import Any

from verl.utils.reward_score import register


@register("episode")
def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    """``extra_info["reward_total"]``: the agent's composed reward for the trajectory."""
    if not extra_info or "reward_total" not in extra_info:
        raise ValueError(f"episode reward for '{data_source}' needs extra_info['reward_total'] from the agent rollout")
    return float(extra_info["reward_total"])
