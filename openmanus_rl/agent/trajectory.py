"""`Trajectory`: one episode's token sequence, loss mask, log-probs and readable turns.

Token layout after the prompt (``response_*`` lists, index = response position):

* a model turn: the sampled ids, mask 1, their log-probs; if it does not end
  with the end-of-turn token (stopped by length or a stop string), that token
  is appended with mask 0 and log-prob 0 so the next turn starts cleanly;
* an observation turn: chat-template wrapped observation ids, mask 0, log-prob 0.

The episode's env reward is the reward of its last env step (AgentGym's rule);
``status`` is "running", then "done" (the env said done), "turn_limit",
"truncated" (token budget) or "failed" (env error or timeout).

The methods below are the episode's own state changes, in the order an episode
takes them: `start` (the env is reset), `set_first_prompt`, then per turn
`open_window`, `add_reply` and either `reject` (no valid action) or `add_step`
(the env's answer), whose observation waits in ``pending_observation`` until
`enter_observation` puts it in the sequence; `end` and `fail` stop it.  Token
work (tokenising, truncating, parsing) and env calls stay with the agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openmanus_rl.envs.client import EnvClient, StepResult

from .templates import ParsedAction

FINISHED = ("done", "turn_limit", "truncated", "failed")
ENDINGS = ("done", "turn_limit", "truncated")  # the ends of an episode that did not fail (`Trajectory.end`)


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

    # ------------------------------------------------------------------ the episode
    def start(self, client: EnvClient, observation: str) -> None:
        """The env is reset: ``client`` plays the episode, its first ``observation`` waits for `set_first_prompt`."""
        self.client, self.server, self.pending_observation = client, client.server_url, observation

    def set_first_prompt(self, prompt_ids: list[int], tokens: int, cut: bool) -> None:
        """The first prompt, built around the pending first observation (none: empty), of which it holds
        ``tokens`` tokens (``cut``: truncated); that observation's record is in the sequence."""
        observation, self.pending_observation = self.pending_observation or "", None
        self.prompt_ids = prompt_ids
        self.truncated_observations += cut
        self.turns.append(
            {"role": "observation", "text": observation, "tokens": tokens, "truncated": cut, "in_sequence": True}
        )

    def open_window(self, history_window: int) -> None:
        """Record where the next turn's generation context starts in the response (`window_start`)."""
        self.windows.append(self.window_start(history_window))

    def add_reply(
        self, ids: list[int], log_probs: list[float], eot_id: int, text: str, parsed: ParsedAction, reason: str
    ) -> None:
        """Append a model turn: its tokens (`add_model_turn`), its decoded ``text`` and its record (the ``parsed``
        action, ``reason``: why generation stopped)."""
        appended = self.add_model_turn(ids, log_probs, eot_id)
        self.model_texts.append(text)
        self.turns.append(
            {
                "role": "assistant",
                "text": text,
                "action": parsed.action,
                "kind": parsed.kind,
                "valid": parsed.valid,
                "tokens": len(ids),
                "finish_reason": reason,
                "end_of_turn_appended": appended,
            }
        )

    def reject(self, feedback: str) -> None:
        """The last reply holds no valid action: count it, and queue ``feedback`` (what was wrong) for the next
        turn."""
        self.invalid_actions += 1
        self.observe(feedback, feedback=True)

    def add_step(self, result: StepResult) -> None:
        """The env's answer to the last reply's action: its reward (on that turn's record too), its observation
        queued for the next turn, and the episode "done" when the env says so."""
        self.step_rewards.append(result.reward)
        self.turns[-1].update(reward=result.reward, done=result.done)
        self.observe(result.observation)
        if result.done:
            self.end("done")

    def observe(self, observation: str, feedback: bool = False) -> None:
        """Queue ``observation`` for the next turn (`enter_observation` puts it in the sequence); ``feedback``: it
        is the agent's own answer to an invalid reply."""
        self.pending_observation, self.pending_feedback = observation, feedback
        self.turns.append({"role": "observation", "text": observation, "feedback": feedback, "in_sequence": False})

    def enter_observation(self, ids: list[int], tokens: int, cut: bool) -> None:
        """Put the pending observation in the sequence as the wrapped turn ``ids`` (``tokens`` tokens of the
        observation, ``cut``: truncated)."""
        self.add_observation_turn(ids)
        self.truncated_observations += cut
        self.turns[-1].update(tokens=tokens, truncated=cut, in_sequence=True)
        self.pending_observation = None

    def end(self, status: str) -> None:
        """Stop the episode with one of `ENDINGS` (a failure is `fail`)."""
        if status not in ENDINGS:
            raise ValueError(f"an episode ends with one of {list(ENDINGS)}, not {status!r}")
        self.status = status

    def fail(self, error: str) -> None:
        """Stop the episode as failed (an env error or timeout): it is never scored."""
        self.status = "failed"
        self.error = error
        self.turns.append({"role": "error", "text": error})
