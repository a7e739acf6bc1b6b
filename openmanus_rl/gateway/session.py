"""`Session`: one episode's calls, turned into exact-token training samples.

Each call's prompt is the conversation rendered with the chat template and encoded once, by us;
the engine's sampled ids and log-probs are kept as returned (cut after the first end-of-turn
token) and the reply text is never encoded again.

A sample is one training row: a first prompt, then after it model replies (mask 1, the engine's
log-probs), the tokens of the messages added between calls, and an end-of-turn token appended
where a reply stopped without one (all mask 0, log-prob 0), as in the built-in agent's layout.

Continuation rule.  A call continues the open sample when either

* its messages are the previous call's messages, then the reply we gave (same content and tool
  calls: the agent sent our answer back), then any new messages, and the template's rendering
  of the longer conversation extends that of the shorter one.  The sequence is then the previous
  prompt, the sampled ids, the end-of-turn token if the reply lacked it, and the text the template
  writes after that assistant turn's end-of-turn token (`ChatRenderer.after_assistant`), encoded
  once.  Re-rendering the reply (re-encoding its text, rebuilding its tool-call blocks) is thus never
  compared with the sampled ids; or
* the fresh rendering of the whole conversation, encoded, starts with the open sample's tokens
  (the agent rewrote the messages but not their tokens).

Otherwise (the agent rewrote its history, or changed the tools) the open sample is closed and the
call starts a new sample from the fresh rendering (a prefix break, counted in ``prefix_breaks``);
every sample of an episode shares its reward and group.

Budget: a new sample's prompt holds at most ``max_prompt_length`` tokens, and what follows it at
most `GatewayConfig.response_budget`; a call that would not leave room for a one-token reply and
its end-of-turn token is answered 400 ``context_length_exceeded`` (and the episode is marked
truncated).  ``max_tokens`` is the least of the run's ``max_response_length``, the request's
``max_completion_tokens`` / ``max_tokens`` and the room left.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any

from verl.utils.openai_api import ApiError, ChatRequest
from verl.utils.seeding import SEED_MOD

from .api import Reply, ignored_sampling
from .config import GatewayConfig
from .dispatch import Dispatcher
from .render import ChatRenderer, ParsedReply, parse_reply


def call_seed(key: str, call: int) -> int:
    """The engine seed of call ``call`` of the episode ``key`` names (``"run_seed:step:task:copy"``):
    blake2b of ``"key:call"`` in ``[0, 2**31)``, whatever the batch it lands in."""
    digest = hashlib.blake2b(f"{key}:{call}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % SEED_MOD


@dataclass(frozen=True)
class Policy:
    """What every call of one rollout shares."""

    renderer: ChatRenderer
    dispatcher: Dispatcher
    config: GatewayConfig
    do_sample: bool
    model: str

    @property
    def sampling(self) -> dict[str, float]:
        """The sampling every call gets: the run's (`Sampling.generated`: greedy in validation)."""
        return asdict(self.config.sampling.generated(self.do_sample))


@dataclass
class Sample:
    """One training row's tokens (see the module docstring)."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)  # each reply's last sampled token

    @property
    def sequence(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    def extend(self, ids: list[int], mask: int, log_probs: list[float] | None = None) -> None:
        self.response_ids += ids
        self.response_mask += [mask] * len(ids)
        self.log_probs += log_probs if log_probs is not None else [0.0] * len(ids)


@dataclass
class CallRecord:
    """One answered call: the engine's prompt, what it sampled, and where it went."""

    sample: int
    prompt_ids: list[int]
    response_ids: list[int]
    log_probs: list[float]
    finish_reason: str  # the engine's
    seed: int
    content: str | None
    tool_calls: list[dict[str, Any]]


@dataclass
class Pending:
    """A call handed to the engine; `Session.finish` completes it."""

    request: ChatRequest
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    added_ids: list[int]  # continuation: the ids after the open sample; new sample: its prompt
    new_sample: bool
    prompt_ids: list[int]
    max_tokens: int
    seed: int
    ignored: list[str]
    future: Future


class Session:
    """One episode's endpoint state; `begin` and `finish` run on the server, `close` on the rollout."""

    def __init__(self, session_id: str, key: str, policy: Policy, seed_key: str, route: int) -> None:
        self.id, self.key, self.policy, self.seed_key, self.route = session_id, key, policy, seed_key, route
        self.samples: list[Sample] = []
        self.calls: list[CallRecord] = []
        self.prefix_breaks = 0
        self.truncated = False
        self.closed = False
        self._busy = False
        self._last: tuple[list[dict[str, Any]], list[dict[str, Any]] | None] | None = None
        self._lock = threading.Lock()

    @property
    def final_text(self) -> str:
        """The last reply's content ("" before any)."""
        return (self.calls[-1].content or "") if self.calls else ""

    def close(self) -> None:
        with self._lock:
            self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise ApiError(404, f"session {self.id} is closed: its episode ended", "session_closed")

    # ------------------------------------------------------------------ a call
    def begin(self, request: ChatRequest) -> Pending:
        """Build the call's tokens and hand it to the engine; `ApiError` when it cannot be answered."""
        renderer, config = self.policy.renderer, self.policy.config
        with self._lock:
            self._check_open()
            if self._busy:
                raise ApiError(
                    409, f"session {self.id} is answering another call: send one call at a time", "session_busy"
                )
            messages = renderer.messages(request.messages, request.tools)
            tools = renderer.template_tools(request.tools)
            added = self._continuation(messages, tools)
            new_sample = added is None
            if added is None:
                prompt = renderer.encode(renderer.render(messages, tools, True))
                if len(prompt) > config.max_prompt_length:
                    raise ApiError(
                        400,
                        f"the prompt is {len(prompt)} tokens, above max_prompt_length={config.max_prompt_length}",
                        "context_length_exceeded",
                        "messages",
                    )
                room, added = config.response_budget - 1, prompt
            else:
                sample = self.samples[-1]
                prompt = sample.sequence + added
                room = config.response_budget - len(sample.response_ids) - len(added) - 1
                if room < 1:
                    self.truncated = True
                    raise ApiError(
                        400,
                        f"the conversation's {len(prompt)} tokens leave no room for a reply: at most "
                        f"{config.response_budget} tokens may follow its first prompt "
                        f"(max_trajectory_length - max_prompt_length)",
                        "context_length_exceeded",
                        "messages",
                    )
            max_tokens = min(config.max_response_length, request.requested_max_tokens or room, room)
            seed = call_seed(self.seed_key, len(self.calls))
            meta = {
                **self.policy.sampling,
                "max_tokens": max_tokens,
                "stop_token_ids": [renderer.chat.eot_id],
                "stop": request.stops,
                "do_sample": self.policy.do_sample,
            }
            future = self.policy.dispatcher.generate(prompt, seed, self.route, meta)
            self._busy = True
            return Pending(
                request,
                messages,
                tools,
                added,
                new_sample,
                prompt,
                max_tokens,
                seed,
                ignored_sampling(request, self.policy.sampling),
                future,
            )

    def abort(self) -> None:
        """The engine did not answer the pending call."""
        with self._lock:
            self._busy = False

    def finish(self, pending: Pending, ids: list[int], log_probs: list[float], reason: str) -> Reply:
        """Record the engine's answer to ``pending`` and build the response."""
        renderer = self.policy.renderer
        eot = renderer.chat.eot_id
        with self._lock:
            self._busy = False
            self._check_open()
            if len(ids) > pending.max_tokens or len(log_probs) != len(ids):
                raise ApiError(
                    500,
                    f"the engine returned {len(ids)} ids and {len(log_probs)} log-probs for "
                    f"max_tokens={pending.max_tokens}",
                    "engine_error",
                    type="server_error",
                )
            if eot in ids:
                end = ids.index(eot) + 1
                ids, log_probs = ids[:end], log_probs[:end]
            if pending.new_sample:
                self.prefix_breaks += bool(self.samples)
                self.samples.append(Sample(list(pending.prompt_ids)))
            else:
                self.samples[-1].extend(pending.added_ids, 0)
            sample = self.samples[-1]
            sample.extend(ids, 1, log_probs)
            if ids:
                sample.turn_ends.append(len(sample.response_ids) - 1)
            if not ids or ids[-1] != eot:
                sample.extend([eot], 0)
            parsed = self._parse(pending.request, renderer.decode(ids))
            call = len(self.calls)
            tool_calls = [
                {
                    "id": f"call_{self.id}_{call}_{k}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for k, (name, arguments) in enumerate(parsed.calls)
            ]
            finish = "tool_calls" if tool_calls else "length" if reason == "length" and ids[-1:] != [eot] else "stop"
            self.calls.append(
                CallRecord(
                    len(self.samples) - 1,
                    pending.prompt_ids,
                    ids,
                    log_probs,
                    reason,
                    pending.seed,
                    parsed.content,
                    tool_calls,
                )
            )
            reply_calls = [(c["id"], name, arguments) for c, (name, arguments) in zip(tool_calls, parsed.calls)]
            self._last = (pending.messages + [renderer.assistant(parsed.content, reply_calls)], pending.tools)
            return Reply(
                f"chatcmpl-{self.id}-{call}",
                self.policy.model,
                int(time.time()),
                parsed.content,
                tool_calls,
                finish,
                len(pending.prompt_ids),
                len(ids),
                {
                    "session": self.id,
                    "call": call,
                    "sample": len(self.samples) - 1,
                    "sampling": {
                        **self.policy.sampling,
                        "do_sample": self.policy.do_sample,
                        "max_tokens": pending.max_tokens,
                        "seed": pending.seed,
                    },
                    "ignored": pending.ignored,
                },
            )

    # ------------------------------------------------------------------ helpers
    def _continuation(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int] | None:
        """The ids to add to the open sample when this call continues it (module docstring), else None."""
        if self._last is None:
            return None
        renderer, sequence = self.policy.renderer, self.samples[-1].sequence
        last_messages, last_tools = self._last
        turn = len(last_messages) - 1
        if tools == last_tools and messages[: turn + 1] == last_messages:
            text = renderer.after_assistant(messages, tools, turn)
            if text is not None:
                return renderer.encode(text)
        fresh = renderer.encode(renderer.render(messages, tools, True))
        return fresh[len(sequence) :] if fresh[: len(sequence)] == sequence else None

    @staticmethod
    def _parse(request: ChatRequest, text: str) -> ParsedReply:
        """The reply's content (cut at the first stop string) and, when tools are offered and
        ``tool_choice`` is not "none", its tool calls."""
        cuts = [text.find(stop) for stop in request.stops if stop and stop in text]
        text = text[: min(cuts)] if cuts else text
        if request.tools and request.tool_choice != "none":
            return parse_reply(text)
        return ParsedReply(text, ())
