"""Reward composition (goal, length, format) and allocation of a trajectory's reward onto its tokens."""

from .allocation import STRATEGIES, allocate
from .components import EpisodeOutcome, FormatReward, GoalReward, LengthPenalty, RewardComponent
from .composer import COMPONENT_TYPES, RewardComposer

__all__ = [
    "COMPONENT_TYPES", "EpisodeOutcome", "FormatReward", "GoalReward", "LengthPenalty", "RewardComponent",
    "RewardComposer", "STRATEGIES", "allocate",
]
