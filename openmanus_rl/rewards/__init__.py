"""Reward composition: an episode's goal, length and format components and their weighted total.

Allocation onto tokens, and every score the trainer uses, live in the reward path (`verl.trainer.ppo.reward`).
"""

from .components import (
    COMPONENTS,
    EpisodeOutcome,
    FormatReward,
    GoalReward,
    LengthPenalty,
    RewardComponent,
    load_component,
    register_component,
)
from .composer import RewardComposer

__all__ = [
    "COMPONENTS",
    "EpisodeOutcome",
    "FormatReward",
    "GoalReward",
    "LengthPenalty",
    "RewardComponent",
    "RewardComposer",
    "load_component",
    "register_component",
]
