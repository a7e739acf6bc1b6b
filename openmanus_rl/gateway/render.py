"""Chat messages to the text the model reads, and the model's reply text to an assistant message.

Messages become the dicts a Hugging Face chat template takes: ``developer`` is rendered as
``system``; content given as text parts is joined with newlines; a tool result is a ``tool``
message (how it looks is the template's business).

Tools.  If the tokenizer's chat template renders ``tools=`` (`ChatFormat.native_tools`), tools are
passed to it and an assistant message's ``tool_calls`` go to it as
``{"id", "type", "function": {"name", "arguments": <dict>}}``.
Otherwise (SmolLM2's template ignores ``tools=``) the tools are described in the system message
(`TOOLS_PROMPT`, after the request's own system text, or as a system message of its own), and an
assistant message's tool calls are written into its text as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, one per line
(`openmanus_rl.agent.tool_calls`).

Replies.  Either way, each ``<tool_call>...</tool_call>`` block of the reply whose body is a JSON
object with a string ``name`` and an object ``arguments`` becomes a tool call; the text around the
blocks is the content (None when empty).  A block that does not parse stays in the content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.agent.tool_calls import TOOL_CALL, ToolCallError, read_call, tool_block
from verl.utils.openai_api import ApiError, Message, Tool

TOOLS_PROMPT = (
    "You can call these tools (one JSON schema per line):\n{tools}\n"
    "To call a tool, answer with one block per call, each on its own line:\n"
    '<tool_call>{{"name": "<tool name>", "arguments": {{<the arguments as a JSON object>}}}}</tool_call>\n'
    "Each call's result comes back in a tool message."
)


@dataclass(frozen=True)
class ParsedReply:
    """A reply's content (None when only tool calls) and its calls as ``(name, arguments)``."""

    content: str | None
    calls: tuple[tuple[str, dict[str, Any]], ...]


def parse_reply(text: str) -> ParsedReply:
    """Split ``text`` into content and the tool calls of its well-formed ``<tool_call>`` blocks."""
    calls, kept, end = [], [], 0
    for match in TOOL_CALL.finditer(text):
        try:
            calls.append(read_call(match.group(1)))
        except ToolCallError:
            continue
        kept.append(text[end : match.start()])
        end = match.end()
    kept.append(text[end:])
    content = "".join(kept).strip() if calls else text
    return ParsedReply(content or None, tuple(calls))


def _arguments(raw: str, param: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ApiError(400, f"{param}: the arguments must be a JSON object", "invalid_value", param)
    return value


class ChatRenderer:
    """Renders conversations with the tokenizer's chat template and encodes them once (no special
    tokens added: the template writes them)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.chat = ChatFormat(tokenizer)
        self.native_tools = self.chat.native_tools

    # ------------------------------------------------------------------ messages
    def assistant(self, content: str | None, calls: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
        """An assistant message as the template gets it; ``calls``: ``(id, name, arguments)``."""
        if self.native_tools:
            message: dict[str, Any] = {"role": "assistant", "content": content or ""}
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
                ]
            return message
        blocks = [tool_block(name, arguments) for _, name, arguments in calls]
        return {"role": "assistant", "content": "\n".join(([content] if content else []) + blocks)}

    def messages(self, messages: list[Message], tools: list[Tool] | None) -> list[dict[str, Any]]:
        """The template's messages for a request (with the tools' system text when the template has no tools)."""
        out: list[dict[str, Any]] = []
        for i, m in enumerate(messages):
            if m.role == "assistant":
                calls = [
                    (
                        c.id,
                        c.function.name,
                        _arguments(c.function.arguments, f"messages.{i}.tool_calls.{j}.function.arguments"),
                    )
                    for j, c in enumerate(m.tool_calls or [])
                ]
                out.append(self.assistant(m.text or None, calls))
            elif m.role == "tool":
                message = {"role": "tool", "content": m.text}
                if self.native_tools and m.tool_call_id is not None:
                    message["tool_call_id"] = m.tool_call_id
                out.append(message)
            else:
                out.append({"role": "system" if m.role == "developer" else m.role, "content": m.text})
        if tools and not self.native_tools:
            text = TOOLS_PROMPT.format(tools="\n".join(json.dumps(t.function.model_dump()) for t in tools))
            if out and out[0]["role"] == "system":
                out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{text}"}
            else:
                out.insert(0, {"role": "system", "content": text})
        return out

    def template_tools(self, tools: list[Tool] | None) -> list[dict[str, Any]] | None:
        """What goes to the template's ``tools=``: the tools when it renders them, else None."""
        return [t.model_dump() for t in tools] if tools and self.native_tools else None

    # ------------------------------------------------------------------ text and ids
    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, generation_prompt: bool
    ) -> str:
        """The template's text; `ApiError` 400 when the template refuses the conversation."""
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=generation_prompt, tokenize=False
            )
        except Exception as exc:  # noqa: BLE001 - the template's own error, answered to the client
            raise ApiError(
                400, f"the chat template cannot render these messages: {exc}", "invalid_messages", "messages"
            ) from None

    def encode(self, text: str) -> list[int]:
        return self.chat.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.chat.decode(ids)

    def after_assistant(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, turn: int
    ) -> str | None:
        """The text the template writes after message ``turn`` (an assistant message) ends with its end-of-turn
        token, up to the generation prompt; None when the template's renderings do not extend each other."""
        through = self.render(messages[: turn + 1], tools, False)
        full = self.render(messages, tools, True)
        end = through.rfind(self.chat.eot_text)
        if end < 0 or not full.startswith(through):
            return None
        return full[end + len(self.chat.eot_text) :]
