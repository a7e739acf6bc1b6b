"""The OpenAI chat-completions request as this project's servers accept it: parsing, checks and errors.

Shared by the agent gateway (`openmanus_rl.gateway`) and the served LLM judge (`verl.workers.judge_server`).
Requests are checked before any token is made: a body that is not a JSON object, an unknown role, a
message without content, ``n`` other than 1 or ``stream: true`` is an `ApiError` (400) with an
OpenAI-style error object ``{"error": {"message", "type", "param", "code"}}``. Unknown fields are
accepted and ignored (the request keeps them in ``model_extra``), as most OpenAI-compatible servers do.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ApiError(Exception):
    """An error answered to the client: HTTP ``status`` and the OpenAI error object."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        param: str | None = None,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param, self.type = status, message, code, param, type

    def payload(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TextPart(_Model):
    type: Literal["text"]
    text: str


class FunctionCall(_Model):
    name: str
    arguments: str  # a JSON object, as a string


class ToolCall(_Model):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Model):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The content as one string (text parts joined by newlines; none: "")."""
        if isinstance(self.content, list):
            return "\n".join(part.text for part in self.content)
        return self.content or ""


class FunctionSpec(_Model):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class Tool(_Model):
    type: Literal["function"]
    function: FunctionSpec


class NamedToolChoice(_Model):
    type: Literal["function"]
    function: dict[str, Any]


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = ""
    messages: list[Message] = Field(min_length=1)
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    stream: bool | None = None
    n: int | None = None

    @property
    def stops(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    @property
    def requested_max_tokens(self) -> int | None:
        """``max_completion_tokens``, else ``max_tokens``."""
        return self.max_completion_tokens or self.max_tokens


def parse_chat_request(body: Any) -> ChatRequest:
    """A checked `ChatRequest`, or `ApiError` 400 naming the first bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, f"the body must be a JSON object, got {type(body).__name__}", "invalid_body")
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        param = ".".join(str(part) for part in first["loc"])
        raise ApiError(400, f"{param or 'body'}: {first['msg']}", "invalid_value", param or None) from None
    if request.stream:
        raise ApiError(
            400,
            "streaming is not supported: send stream=false (each call is answered whole)",
            "unsupported_parameter",
            "stream",
        )
    if request.n not in (None, 1):
        raise ApiError(400, f"n must be 1 (one reply per call), got {request.n}", "unsupported_parameter", "n")
    if len(request.stops) > 4 or "" in request.stops:
        raise ApiError(400, f"stop takes at most 4 non-empty strings, got {request.stops!r}", "invalid_value", "stop")
    for i, message in enumerate(request.messages):
        if message.role == "assistant" and message.content is None and not message.tool_calls:
            raise ApiError(
                400,
                f"messages.{i}: an assistant message needs content or tool_calls",
                "invalid_value",
                f"messages.{i}.content",
            )
        if message.role != "assistant" and message.content is None:
            raise ApiError(
                400, f"messages.{i}: a {message.role} message needs content", "invalid_value", f"messages.{i}.content"
            )
    return request
