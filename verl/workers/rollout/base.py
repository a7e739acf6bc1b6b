"""The rollout interface the agent uses: token ids in; sampled ids, their log-probs and a finish reason out.

Engines keep the exact sampled ids (nothing is re-tokenised) and report the
log-prob of each sampled token under the engine's own (untempered unless the
engine says otherwise) distribution. The trainer recomputes old log-probs
itself, so these are for diagnostics and for checking weight sync.

Streaming (multi-turn agents that must not wait for the slowest reply of a
turn): `RolloutEngine.submit` queues requests under caller-chosen ids,
`RolloutEngine.poll` advances generation and returns the requests that
finished.  An engine with continuous batching (vLLM) overrides both; the
default here queues the requests and generates everything queued in one
`generate` call per poll, so any engine can serve a streaming caller.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterable, Mapping

import torch


def prefix_cache_delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    """The prefix-cache counts between two readings of `RolloutEngine.prefix_cache_stats` (``after - before``
    per counter); None where the engine does not count them."""
    if before is None or after is None:
        return None
    return {key: after[key] - before[key] for key in after}


@dataclass(frozen=True)
class Sampling:
    """The distribution a policy samples from: the logits divided by ``temperature`` (0: greedy), then the top-k
    filter (``top_k``; -1: off), then the top-p one (``top_p``; 1: off). A run sets it once, as
    ``actor_rollout_ref.rollout`` (`verl.workers.config.RolloutConfig.sampling`, which checks its ranges); the
    rollouts are handed it and every generation and log-prob call carries it in its ``meta_info``."""

    temperature: float
    top_p: float
    top_k: int

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Sampling:
        """The sampling a worker call's ``meta_info`` carries; ValueError naming the first key it lacks."""
        names = [f.name for f in fields(cls)]
        if missing := [name for name in names if name not in meta]:
            raise ValueError(
                f"meta_info has no {missing[0]!r}: every generation and log-prob call carries its sampling "
                f"({', '.join(names)}; the trainer's: actor_rollout_ref.rollout)"
            )
        return cls(float(meta["temperature"]), float(meta["top_p"]), int(meta["top_k"]))

    def generated(self, do_sample: bool) -> Sampling:
        """What the engine samples with: this, or greedy decoding (temperature 0: each step's most likely token)
        when ``do_sample`` is False (validation, a greedy baseline)."""
        return self if do_sample else replace(self, temperature=0.0)


@dataclass
class SamplingParams:
    """Per-request settings: the `Sampling` (``temperature == 0``: greedy), the length, stops and seed."""

    temperature: float
    top_p: float
    top_k: int
    max_tokens: int = 256
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None
    top_logprobs: int = 0  # also report the k most likely tokens at each step (`GenerationOutput.top_log_probs`)


@dataclass
class GenerationOutput:
    token_ids: list[int]
    log_probs: list[float]
    finish_reason: str  # "stop" (eos, stop string or stop id) or "length"
    top_log_probs: list[dict[int, float]] = field(
        default_factory=list
    )  # with top_logprobs=k: per step, token -> log-prob


class RolloutEngine(ABC):
    """A generation engine holding its own copy of the policy weights."""

    def __init__(self) -> None:
        self._queued: dict[str, tuple[list[int], SamplingParams]] = {}

    @abstractmethod
    def generate(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[GenerationOutput]:
        """One output per prompt, in order."""

    @abstractmethod
    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the engine's weights with the policy's (Hugging Face parameter names)."""

    def submit(self, requests: list[tuple[str, list[int], SamplingParams]]) -> None:
        """Queue ``(request_id, prompt ids, params)`` requests; ids must be unique among unfinished requests."""
        for request_id, prompt, params in requests:
            if request_id in self._queued:
                raise ValueError(f"request id {request_id!r} is already queued")
            self._queued[request_id] = (list(prompt), params)

    def poll(self, max_wait_s: float) -> list[tuple[str, GenerationOutput]]:
        """Generate until at least one queued request finishes or ``max_wait_s`` passes (at least one
        engine step when any request is unfinished); returns the finished ``(request_id, output)`` pairs.

        This default generates every queued request in one `generate` call."""
        ids = list(self._queued)
        if not ids:
            return []
        prompts, params = zip(*(self._queued.pop(i) for i in ids))
        return list(zip(ids, self.generate(list(prompts), list(params))))

    def unfinished(self) -> int:
        """How many submitted requests have not been returned by `poll` yet."""
        return len(self._queued)

    def abort_all(self) -> None:
        """Drop every unfinished request (their outputs never come back)."""
        self._queued.clear()

    def prefix_cache_stats(self) -> dict[str, int] | None:
        """Prompt tokens looked up in the prefix cache and found there (``queries``, ``hits``,
        ``requests``) since the engine started; None where the engine does not count them."""
        return None

    def shutdown(self) -> None:  # noqa: B027 - optional hook: engines with nothing to release inherit the no-op
        """Release the engine's resources."""
