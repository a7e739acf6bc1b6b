"""The base of every env's scripted expert (``agentgym/<env>/expert.py``, named by the env's spec as ``expert``).

An `Expert` plays one episode at a time: `Expert.reset` starts a new one and
`Expert.act` maps the observation text, exactly as the agent shows it to the
model, to the env action (``search[red shoes]``, ``click[buy now]``...),
leaving a short reasoning line in ``last_thought``.  The agent cuts an
observation longer than its limit and ends it with `TRUNCATION_MARKER`.
Writing an expert's action as a model reply, and playing experts over HTTP,
is the agent's side (`openmanus_rl.experts`).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import ClassVar

TRUNCATION_MARKER = " [truncated]"  # ends an observation the agent cut to its token limit


class Expert(ABC):
    """A scripted policy for one env: ``reset()``, then ``act(observation)`` once per turn.

    ``noise`` in [0, 1] is how often the expert strays from its best action (each expert says how), drawn
    from ``rng``, seeded by ``seed``; ``noise=0`` is deterministic.
    """

    env_name: ClassVar[str] = ""

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        self.noise, self.seed, self.rng = noise, seed, random.Random(seed)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (``seed``: re-seed the expert's randomness). A subclass that keeps state per episode
        sets it here, after ``super().reset(seed)``; the constructor calls it too."""
        self.last_thought = ""
        self.steps = 0
        if seed is not None:
            self.seed, self.rng = seed, random.Random(seed)

    def noisy(self) -> bool:
        """Whether to stray this time: true with probability ``noise``."""
        return self.noise > 0 and self.rng.random() < self.noise

    def _do(self, action: str, thought: str) -> str:
        """Count a step, keep its thought, and return ``action`` (what `act` ends with)."""
        self.steps += 1
        self.last_thought = thought
        return action

    @abstractmethod
    def act(self, observation: str) -> str:
        """The env action for ``observation``; sets ``last_thought``."""


class BudgetedExpert(Expert):
    """An expert that plans within a move budget: at most ``max_steps`` actions an episode (by default its env's
    ``default_max_steps``, the env's own move limit)."""

    default_max_steps: ClassVar[int] = 0

    def __init__(self, noise: float = 0.0, seed: int = 0, max_steps: int | None = None) -> None:
        self.max_steps = self.default_max_steps if max_steps is None else max_steps
        super().__init__(noise, seed)

    def moves_left(self, shown: int | None) -> int:
        """Actions left this episode: the fewer of what the observation shows (``shown``; None where it shows
        none) and ``max_steps`` minus the actions played."""
        return min(self.max_steps if shown is None else shown, self.max_steps - self.steps)
