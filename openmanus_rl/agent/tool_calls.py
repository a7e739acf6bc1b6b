"""The tool-call block ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``: how a tool call is written
into a reply's text and read back, shared by the agent's ``tool_call`` action template and the gateway.

`tool_block` writes one call (``json.dumps`` of ``{"name", "arguments"}``); `TOOL_CALL` finds closed blocks in a
reply; `read_call` reads a block's body (whitespace around the JSON is allowed, a missing ``"arguments"`` is
``{}``) and raises `ToolCallError`, whose message names the problem, when it is not a call.
"""

from __future__ import annotations

import json
import re
from typing import Any

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


class ToolCallError(ValueError):
    """A ``<tool_call>`` block that is not a call; the message says why."""


def tool_block(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def read_call(body: str) -> tuple[str, dict[str, Any]]:
    """``(name, arguments)`` of a block's body; `ToolCallError` when it is not a JSON call."""
    try:
        call = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ToolCallError(f"the <tool_call> block is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ToolCallError('the <tool_call> block must be a JSON object with a string "name"')
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ToolCallError('the "arguments" of the <tool_call> block must be a JSON object')
    return call["name"], arguments
