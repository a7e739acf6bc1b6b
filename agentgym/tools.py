"""`EnvTool`: one kind of env action declared as a function tool, for the agent's ``tool_call`` action format.

A tool has a name, a description, its arguments (``properties``: JSON-schema property objects, every one
required, none other allowed) and ``action``, a `str.format` string that writes a call's arguments as the env's
action string (``"search[{query}]"`` with ``{"query": "red shoes"}`` is ``search[red shoes]``).

* `EnvTool.schema`: the OpenAI function-tool shape ``{"type": "function", "function": {"name", "description",
  "parameters"}}``; `EnvTool.signature`: the same in one line of a prompt, ``name(arg: type, ...): description``
  then each string or integer argument's description (``search(query: string): Search. query: the keywords.``).
* `EnvTool.problem`: what is wrong with a call's arguments (a missing, unknown or ill-typed one), None if nothing.
* `EnvTool.arguments_of`: the inverse of `EnvTool.action_for`, the arguments that write a given action string
  (None when this tool cannot write it); `call_for` finds the first of an env's tools that can.

Argument types (a property's ``type``): ``"string"``, with ``enum`` one string of a fixed list; ``"integer"``, a
JSON integer (not a boolean). A spec file writes a property as a ``[tools.properties.<argument>]`` table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from string import Formatter
from typing import Any, Mapping


def _fields(action: str) -> list[str]:
    return [name for _, name, _, _ in Formatter().parse(action) if name is not None]


@dataclass(frozen=True)
class EnvTool:
    name: str
    description: str
    action: str
    properties: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if sorted(_fields(self.action)) != sorted(self.properties):
            raise ValueError(
                f"tool {self.name!r}: the action {self.action!r} must use each argument "
                f"{sorted(self.properties)} exactly once"
            )

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments object."""
        return {
            "type": "object",
            "properties": {k: dict(v) for k, v in self.properties.items()},
            "required": list(self.properties),
            "additionalProperties": False,
        }

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def signature(self) -> str:
        """The tool in one prompt line (see the module docstring)."""

        def kind(prop: Mapping[str, Any]) -> str:
            return " | ".join(map(json.dumps, prop["enum"])) if "enum" in prop else str(prop["type"])

        arguments = ", ".join(f"{key}: {kind(prop)}" for key, prop in self.properties.items())
        notes = "".join(
            f" {key}: {prop['description']}." for key, prop in self.properties.items() if "enum" not in prop
        )
        return f"{self.name}({arguments}): {self.description}{notes}"

    def problem(self, arguments: Mapping[str, Any]) -> str | None:
        """The first thing wrong with ``arguments`` for this tool, in words; None when they fit its schema."""
        for key in self.properties:
            if key not in arguments:
                return f"tool {self.name!r} needs the argument {key!r}"
        for key in arguments:
            if key not in self.properties:
                return (
                    f"tool {self.name!r} takes no argument {key!r} "
                    f"(its arguments: {', '.join(self.properties) or 'none'})"
                )
        for key, prop in self.properties.items():
            value = arguments[key]
            if prop["type"] == "integer":
                wanted, fits = "an integer", isinstance(value, int) and not isinstance(value, bool)
            elif "enum" in prop:
                wanted, fits = "one of " + ", ".join(map(json.dumps, prop["enum"])), value in prop["enum"]
            else:
                wanted, fits = "a string", isinstance(value, str)
            if not fits:
                return f"argument {key!r} of tool {self.name!r} must be {wanted}, got {json.dumps(value)}"
        return None

    def action_for(self, arguments: Mapping[str, Any]) -> str:
        """The env action a call with ``arguments`` (which fit the schema) stands for."""
        return self.action.format(**arguments)

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        parts = []
        for literal, name, _, _ in Formatter().parse(self.action):
            parts.append(re.escape(literal))
            if name is not None:
                prop = self.properties[name]
                if prop["type"] == "integer":
                    value = r"-?\d+"
                elif "enum" in prop:
                    value = "|".join(map(re.escape, prop["enum"]))
                else:
                    value = ".+?"
                parts.append(f"(?P<{name}>{value})")
        return re.compile("".join(parts), re.DOTALL)

    def arguments_of(self, action: str) -> dict[str, Any] | None:
        """The arguments whose call writes exactly ``action``; None when this tool writes no such action."""
        match = self._pattern.fullmatch(action)
        if match is None:
            return None
        found = match.groupdict()
        arguments = {
            key: int(found[key]) if prop["type"] == "integer" else found[key] for key, prop in self.properties.items()
        }
        return arguments if self.action_for(arguments) == action else None


def call_for(tools: tuple[EnvTool, ...], action: str) -> tuple[EnvTool, dict[str, Any]] | None:
    """The first of ``tools`` that writes ``action``, with its arguments; None when none does."""
    for tool in tools:
        if (arguments := tool.arguments_of(action)) is not None:
            return tool, arguments
    return None
