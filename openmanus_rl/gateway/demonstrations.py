"""Expert demonstrations of an agent program: the env's expert answers in place of the model, through the gateway.

A program's warm start must be its own conversations (its system prompt, its tool messages, its history), not
the built-in agent's.  `ProgramExpert` is a generator with the rollout worker's ``generate_sequences``
interface that the gateway's `Dispatcher` drives like the engine: for each call it reads the env's
observation out of the prompt (the content of the last user or tool message, as the chat template wrote
it), asks the env's expert (`openmanus_rl.experts`) for the action, and answers with the ``tool_call``
reply (the thought, then ``<tool_call>{"name": <the env tool that writes the action>, "arguments":
{...}}</tool_call>``), tokenised, plus the end-of-turn token, log-probs 0; a reply longer than the call's
``max_tokens`` is cut there with finish reason ``"length"``, as the model's would be.  The gateway keeps the exact
tokens, so a demonstration is the sample RL trains on when the program plays the same episode.

The contract a program must meet: the env's observation is the last message of each model call (a user
message or a tool result), verbatim, and the program's tools are the env's (`EnvSpec.tools`, the same
names and arguments).  The example WebShop agent meets it.

Episodes play one at a time (``concurrency=1``): a call whose prompt does not extend the previous call's
prompt and reply starts a new episode, and a fresh expert.
"""

from __future__ import annotations

from typing import Any, Mapping

from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.agent.output import objects
from openmanus_rl.agent.templates import get_action_template
from openmanus_rl.envs import get_env_spec
from openmanus_rl.experts import get_expert
from openmanus_rl.experts.registry import format_reply
from verl.protocol import DataProto

OBSERVATION_ROLES = ("user", "tool")


def message_heads(chat: ChatFormat) -> list[str]:
    """The text the chat template writes before a user message's and a tool message's content
    (`ChatFormat.message_wrapper`), without the whitespace that separates it from the turn before."""
    heads = []
    for role in OBSERVATION_ROLES:
        head = chat.message_wrapper(role)[1].lstrip()
        if not head:
            raise ValueError(f"this chat template writes nothing before a {role} message's content")
        heads.append(head)
    return heads


class ProgramExpert:
    """The expert of ``env_name`` as the generator behind the gateway (see the module docstring).
    ``episodes`` holds each episode's actions, in order."""

    def __init__(self, tokenizer: Any, env_name: str, expert_kwargs: Mapping[str, Any] | None = None) -> None:
        self.chat = ChatFormat(tokenizer)
        self.spec = get_env_spec(env_name)
        self.template = get_action_template("tool_call")
        self.expert_kwargs = dict(expert_kwargs or {})
        self.heads = message_heads(self.chat)
        self.tail = self._decode(self.chat.turn_tail_ids)
        self.episodes: list[list[str]] = []
        self._context: list[int] | None = None
        self._expert: Any = None

    def _decode(self, ids: list[int]) -> str:
        return self.chat.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def observation(self, prompt_ids: list[int]) -> str:
        """The content of the prompt's last user or tool message."""
        text = self._decode(prompt_ids).removesuffix(self.tail)
        at, head = max((text.rfind(h), h) for h in self.heads)
        if at < 0:
            raise ValueError("the prompt holds no user or tool message")
        return text[at + len(head) :]

    def _answer(self, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], str]:
        context = self._context
        if context is None or prompt_ids[: len(context)] != context:
            self._expert = get_expert(self.spec.name, **self.expert_kwargs)
            self._expert.reset(seed=len(self.episodes))
            self.episodes.append([])
        action = self._expert.act(self.observation(prompt_ids))
        self.episodes[-1].append(action)
        ids = self.chat.encode(format_reply(self.template, action, self._expert.last_thought, self.spec))
        ids.append(self.chat.eot_id)
        reason = "stop"
        if len(ids) > max_tokens:  # cut where the model would be: the rest of the budget, finish reason "length"
            ids, reason = ids[:max_tokens], "length"
        self._context = prompt_ids + ids
        return ids, reason

    def generate_sequences(self, request: DataProto) -> DataProto:
        nt = request.non_tensor_batch
        if len(nt["prompt_ids"]) != 1:
            raise ValueError("ProgramExpert answers one call at a time: run the program with concurrency=1")
        max_tokens = int(request.meta_info.get("max_tokens", 1 << 30))
        ids, reason = self._answer([int(x) for x in nt["prompt_ids"][0]], max_tokens)
        return DataProto.from_dict(
            non_tensors={
                "response_ids": objects([ids]),
                "response_log_probs": objects([[0.0] * len(ids)]),
                "finish_reason": objects([reason]),
            }
        )
