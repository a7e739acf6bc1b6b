"""Reward composition: an episode's goal, length and format components and their weighted total.

Allocation onto tokens, and every score the trainer uses, live in the reward path (`verl.trainer.ppo.reward`).
"""

from .components import EpisodeOutcome, FormatReward, GoalReward, LengthPenalty, RewardComponent
from .composer import COMPONENT_TYPES, RewardComposer

__all__ = [
    "COMPONENT_TYPES",
    "EpisodeOutcome",
    "FormatReward",
    "GoalReward",
    "LengthPenalty",
    "RewardComponent",
    "RewardComposer",
]
