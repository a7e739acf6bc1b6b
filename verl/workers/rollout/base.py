"""The rollout interface the agent uses: token ids in; sampled ids, their log-probs and a finish reason out.

Engines keep the exact sampled ids (nothing is re-tokenised) and report the
log-prob of each sampled token under the engine's own (untempered unless the
engine says otherwise) distribution. The trainer recomputes old log-probs
itself, so these are for diagnostics and for checking weight sync.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable

import torch


@dataclass
class SamplingParams:
    """Per-request sampling settings; ``temperature == 0`` means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 256
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None


@dataclass
class GenerationOutput:
    token_ids: list[int]
    log_probs: list[float]
    finish_reason: str  # "stop" (eos, stop string or stop id) or "length"


class RolloutEngine(ABC):
    """A generation engine holding its own copy of the policy weights."""

    @abstractmethod
    def generate(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[GenerationOutput]:
        """One output per prompt, in order."""

    @abstractmethod
    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the engine's weights with the policy's (Hugging Face parameter names)."""

    def shutdown(self) -> None:
        """Release the engine's resources."""
