"""Reward components: each maps an episode's outcome to one unweighted number.

* `GoalReward`: the env's verdict.  ``mode="reward"``: the episode's env
  reward divided by the env's reward scale (WebShop 0..1 stays 0..1,
  SciWorld's 0..100 becomes 0..1); ``mode="success"``: 1.0 on success, else 0.0.
* `LengthPenalty`: with ``L`` the tokens the model generated in the episode and
  ``x = max(0, L - max_length) / scale`` (``scale`` defaults to ``max_length``):
  ``-x`` (linear), ``-x**2`` (quadratic) or ``-log(1 + x)`` (log).
* `FormatReward`: the share of the model's turns whose text matches every
  regex in ``patterns`` (``re.search`` with DOTALL); 0.0 for an episode
  without model turns.

Components are registered by name (`register_component`), the built-in ones here; a component of one's own is a
`RewardComponent` subclass in any file with ``@register_component("name")`` above it, named in
``agent.reward_components`` by ``type: name`` (its module imported already) or ``type: package.module:name``
(imported first, as reward modules are: `load_component`). Its other options are its constructor's arguments.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

from verl.utils.imports import import_registering_module


@dataclass(frozen=True)
class EpisodeOutcome:
    """What reward components may look at."""

    env_name: str
    env_reward: float  # the env's episode reward (the last step's reward), unscaled
    success: bool
    reward_scale: float  # the env's reward for a perfect episode (1, or 100 for SciWorld)
    model_tokens: int  # tokens the model generated over the episode
    model_texts: tuple[str, ...]  # the model's turns, decoded


class RewardComponent(ABC):
    @abstractmethod
    def __call__(self, outcome: EpisodeOutcome) -> float:
        """The component's unweighted value for ``outcome``."""


COMPONENTS: dict[str, type[RewardComponent]] = {}


def register_component(name: str) -> Callable[[type[RewardComponent]], type[RewardComponent]]:
    """Class decorator: ``@register_component("name")`` above a `RewardComponent` subclass adds it under ``name``
    (ValueError when another class holds the name)."""

    def add(cls: type[RewardComponent]) -> type[RewardComponent]:
        if not (isinstance(cls, type) and issubclass(cls, RewardComponent)):
            raise ValueError(f"reward component {name!r}: {cls!r} is not a RewardComponent subclass")
        if COMPONENTS.get(name, cls) is not cls:
            raise ValueError(f"reward component {name!r} is already registered ({COMPONENTS[name].__qualname__})")
        COMPONENTS[name] = cls
        return cls

    return add


def load_component(spec: str) -> type[RewardComponent]:
    """The component class ``spec`` names: a registered name, or ``package.module:name`` (the module imported first
    so that it registers ``name``); ValueError naming the known ones otherwise."""
    module, name = import_registering_module(spec, "reward component module")
    if name not in COMPONENTS:
        where = f"{module} registers no reward component named {name!r}" if module else f"unknown type {name!r}"
        raise ValueError(f"{where}; known: {sorted(COMPONENTS)}")
    return COMPONENTS[name]


@register_component("goal")
class GoalReward(RewardComponent):
    def __init__(self, mode: str = "reward") -> None:
        if mode not in ("reward", "success"):
            raise ValueError(f"goal reward mode must be 'reward' or 'success', got {mode!r}")
        self.mode = mode

    def __call__(self, outcome: EpisodeOutcome) -> float:
        if self.mode == "success":
            return 1.0 if outcome.success else 0.0
        return outcome.env_reward / outcome.reward_scale


@register_component("length")
class LengthPenalty(RewardComponent):
    KINDS = ("linear", "quadratic", "log")

    def __init__(self, max_length: int, kind: str = "linear", scale: float | None = None) -> None:
        if not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"length penalty max_length must be a positive int, got {max_length!r}")
        if kind not in self.KINDS:
            raise ValueError(f"length penalty kind must be one of {list(self.KINDS)}, got {kind!r}")
        if scale is not None and scale <= 0:
            raise ValueError(f"length penalty scale must be > 0, got {scale!r}")
        self.max_length = max_length
        self.kind = kind
        self.scale = float(scale or max_length)

    def __call__(self, outcome: EpisodeOutcome) -> float:
        x = max(0, outcome.model_tokens - self.max_length) / self.scale
        if self.kind == "linear":
            return -x
        if self.kind == "quadratic":
            return -(x**2)
        return -math.log1p(x)


@register_component("format")
class FormatReward(RewardComponent):
    def __init__(self, patterns: list[str]) -> None:
        if not patterns:
            raise ValueError("format reward needs at least one regex pattern")
        try:
            self.patterns = [re.compile(p, re.DOTALL) for p in patterns]
        except re.error as exc:
            raise ValueError(f"format reward pattern does not compile: {exc}") from None

    def __call__(self, outcome: EpisodeOutcome) -> float:
        if not outcome.model_texts:
            return 0.0
        good = sum(all(p.search(text) for p in self.patterns) for text in outcome.model_texts)
        return good / len(outcome.model_texts)
