"""Token pieces of the model's chat template, for building sequences without re-encoding model text.

* The first prompt is ``apply_chat_template([user turn], add_generation_prompt=True,
  tokenize=False)`` encoded once.
* A model turn is the exact sampled ids, ending with the end-of-turn token
  (the tokenizer's eos token, ``<|im_end|>`` for SmolLM2).
* An observation turn is ``head + observation ids + tail``: ``head`` is the
  text the template puts between the end-of-turn token and a user message's
  content, ``tail`` the text after that content up to and including the next
  assistant generation prompt.  For SmolLM2: head ``"\\n<|im_start|>user\\n"``,
  tail ``"<|im_end|>\\n<|im_start|>assistant\\n"``.

Both pieces are read off the template itself by rendering a conversation with
marker strings, so any chat template whose renderings extend each other works.

Tools: `ChatFormat.native_tools` says whether the template renders ``tools=``
(a probe conversation renders differently with a tool than without; SmolLM2's
ignores them); ``prompt_ids(text, tools)`` hands tools to the template.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from agentgym.expert import TRUNCATION_MARKER

_USER, _MODEL, _OBS = "\u2063USER\u2063", "\u2063MODEL\u2063", "\u2063OBS\u2063"


class ChatFormat:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        eot = tokenizer.eos_token
        ids = tokenizer.convert_tokens_to_ids(eot) if eot else None
        if not eot or not isinstance(ids, int):
            raise ValueError("the tokenizer has no eos token to end a model turn")
        self.eot_text, self.eot_id = eot, ids
        separator, head, tail = self.message_wrapper("user")
        self.turn_head_ids, self.turn_tail_ids = self.encode(separator + head), self.encode(tail)

    def _render(
        self, messages: list[dict[str, str]], generation_prompt: bool, tools: list[dict[str, Any]] | None = None
    ) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=generation_prompt, tokenize=False
        )

    @cached_property
    def native_tools(self) -> bool:
        """Whether the chat template renders ``tools=`` (one that raises on them does not)."""
        probe = [{"role": "user", "content": "?"}]
        tool = {
            "type": "function",
            "function": {"name": "probe", "description": "probe", "parameters": {"type": "object", "properties": {}}},
        }
        try:
            with_tools = self._render(probe, True, [tool])
        except Exception:  # noqa: BLE001 - a template that rejects tools does not render them
            return False
        return with_tools != self._render(probe, True)

    def message_wrapper(self, role: str = "user") -> tuple[str, str, str]:
        """What the template writes around a ``role`` message that follows a model turn and prompts the next one:
        the text between the model turn's end-of-turn token and the message (``separator``), the text before the
        message's content (``head``) and after it up to the next generation prompt (``tail``)."""
        two = [{"role": "user", "content": _USER}, {"role": "assistant", "content": _MODEL}]
        before = self._render(two, False)
        after = self._render(two + [{"role": role, "content": _OBS}], True)
        model_end = before.find(_MODEL + self.eot_text)
        if model_end < 0 or not after.startswith(before) or after.count(_OBS) != 1:
            raise ValueError(
                f"cannot read the {role} message's wrapper off this chat template: an assistant turn must "
                f"end with {self.eot_text!r} and a longer conversation must extend a shorter one's rendering"
            )
        separator = before[model_end + len(_MODEL) + len(self.eot_text) :]
        head, tail = after[len(before) :].split(_OBS)
        return separator, head, tail

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def prompt_ids(self, user_text: str, tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The first prompt: one user turn plus the assistant generation prompt (with ``tools`` given to the
        template), encoded once."""
        return self.encode(self._render([{"role": "user", "content": user_text}], True, tools))

    def observation_turn_ids(self, observation_ids: list[int]) -> list[int]:
        """``head + observation_ids + tail``: a user turn that follows a model turn and prompts the next one."""
        return self.turn_head_ids + observation_ids + self.turn_tail_ids

    def truncate(self, text: str, max_tokens: int, marker: str = TRUNCATION_MARKER) -> tuple[list[int], bool]:
        """``text``'s ids cut to at most ``max_tokens`` (ending with ``marker``'s ids when cut),
        and whether it was cut."""
        ids = self.encode(text)
        if len(ids) <= max_tokens:
            return ids, False
        mark = self.encode(marker)
        keep = max(0, max_tokens - len(mark))
        return (ids[:keep] + mark)[:max_tokens], True
