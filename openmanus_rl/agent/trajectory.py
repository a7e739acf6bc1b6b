"""`Trajectory`: one episode's token sequence, loss mask, log-probs and readable turns.

Token layout after the prompt (``response_*`` lists, index = response position):

* a model turn: the sampled ids, mask 1, their log-probs; if it does not end
  with the end-of-turn token (stopped by length or a stop string), that token
  is appended with mask 0 and log-prob 0 so the next turn starts cleanly;
* an observation turn: chat-template wrapped observation ids, mask 0, log-prob 0.

The episode's env reward is the reward of its last env step (AgentGym's rule);
``status`` is "running", then "done" (the env said done), "turn_limit",
"truncated" (token budget) or "failed" (env error or timeout).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openmanus_rl.envs.client import EnvClient

FINISHED = ("done", "turn_limit", "truncated", "failed")


@dataclass
class Segment:
    kind: str  # "model" | "observation" | "end_of_turn" (appended, not sampled)
    start: int
    end: int


@dataclass
class Trajectory:
    row: int
    copy: int
    uid: str
    task_id: int
    data_source: str
    seed: int
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)  # last model token of each model turn
    turn_spans: list[tuple[int, int]] = field(default_factory=list)  # each model turn, with an appended end-of-turn
    windows: list[int] = field(default_factory=list)  # where each turn's generation context began in the response
    turns: list[dict[str, Any]] = field(default_factory=list)  # readable record
    model_texts: list[str] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)
    status: str = "running"
    error: str = ""
    invalid_actions: int = 0
    truncated_observations: int = 0
    pending_observation: str | None = None
    pending_feedback: bool = False  # the pending observation is the agent's invalid-action feedback
    client: EnvClient | None = None
    server: str = ""
    env: str = ""  # the env that plays it; "" means the env named by data_source

    @property
    def env_name(self) -> str:
        return self.env or self.data_source

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def num_turns(self) -> int:
        return len(self.model_texts)

    @property
    def model_tokens(self) -> int:
        return sum(self.response_mask)

    @property
    def env_reward(self) -> float:
        return self.step_rewards[-1] if self.step_rewards else 0.0

    def _extend(self, kind: str, ids: list[int], mask: int, log_probs: list[float] | None = None) -> None:
        start = len(self.response_ids)
        self.response_ids += ids
        self.response_mask += [mask] * len(ids)
        self.log_probs += log_probs if log_probs is not None else [0.0] * len(ids)
        self.segments.append(Segment(kind, start, len(self.response_ids)))

    def add_model_turn(self, ids: list[int], log_probs: list[float], eot_id: int) -> bool:
        """Append a sampled turn (mask 1); returns whether an end-of-turn token had to be appended (mask 0)."""
        if len(log_probs) != len(ids):
            raise ValueError(f"generator returned {len(ids)} ids but {len(log_probs)} log-probs")
        start = len(self.response_ids)
        if ids:
            self._extend("model", ids, 1, log_probs)
            self.turn_ends.append(len(self.response_ids) - 1)
        appended = not ids or ids[-1] != eot_id
        if appended:
            self._extend("end_of_turn", [eot_id], 0)
        self.turn_spans.append((start, len(self.response_ids)))
        return appended

    def window_start(self, history_window: int) -> int:
        """Where the next turn's context starts in the response: 0 (all history) unless
        ``history_window`` > 0 turns are already past it, then the start of the last ``history_window`` turns."""
        if history_window <= 0 or len(self.turn_spans) < history_window:
            return 0
        return self.turn_spans[-history_window][0]

    def context(self, history_window: int) -> list[int]:
        """The next turn's generation context: the prompt, then the history from `window_start` on."""
        return self.prompt_ids + self.response_ids[self.window_start(history_window) :]

    def add_observation_turn(self, ids: list[int]) -> None:
        """Append a wrapped observation turn (mask 0)."""
        self._extend("observation", ids, 0)

    def fail(self, error: str) -> None:
        self.status = "failed"
        self.error = error
        self.turns.append({"role": "error", "text": error})
