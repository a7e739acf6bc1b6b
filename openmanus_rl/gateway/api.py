"""The gateway's side of the OpenAI chat-completions wire format: which sampling fields it ignores, and its replies.

Requests are parsed and checked by `verl.utils.openai_api` (shared with the served LLM judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl.utils.openai_api import ChatRequest


def ignored_sampling(request: ChatRequest, applied: dict[str, float]) -> list[str]:
    """The request's sampling fields that asked for something other than what was applied
    (``applied``: temperature, top_p, top_k), in a fixed order."""
    extra = request.model_extra or {}
    asked = {"temperature": request.temperature, "top_p": request.top_p, "top_k": extra.get("top_k")}
    out = [key for key, value in asked.items() if value is not None and value != applied[key]]
    neutral = {"presence_penalty": 0, "frequency_penalty": 0, "repetition_penalty": 1, "min_p": 0}
    out += [key for key, value in neutral.items() if extra.get(key) not in (None, value)]
    out += [key for key in ("seed", "logit_bias") if extra.get(key) not in (None, {})]
    return out


@dataclass
class Reply:
    """One answered call, as the response body reports it."""

    completion_id: str
    model: str
    created: int
    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    gateway: dict[str, Any]

    def body(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason, "logprobs": None}],
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            },
            "gateway": self.gateway,
        }
