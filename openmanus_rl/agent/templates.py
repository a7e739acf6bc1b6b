"""Action templates: how the model is asked to answer, and how its reply is parsed.

A template owns both sides, so the prompt and the parser always agree:
``format_instructions(spec)`` is the text appended to the env's instructions
(``prompt(spec, native_tools)`` adds the tools the chat template is given, if
any), ``parse(text, spec)`` reads the reply, ``format_reply(thought, action,
spec)`` is its inverse (the reply that parses to ``action``: how expert
demonstrations are written), ``invalid_feedback`` is the observation the model
gets when its reply holds no action (unless the parse names the problem in
``ParsedAction.feedback``), and ``format_pattern`` is the regex of a
well-formed reply (the default pattern of the format reward).

* ``react``: ``Thought: ...`` then ``Action: ...``.  The action is the rest of
  the line after the last ``Action:``; a reply without ``Action:`` is taken as
  the action when, stripped, it fully matches the env's action pattern (the
  upstream clients' fallback for bare ``search[...]`` replies).
* ``xml``: ``<think>...</think>`` then ``<action>...</action>``; for envs that
  take final answers (``EnvSpec.accepts_answer``) also ``<answer>...</answer>``,
  which wins over an action and is sent through the spec's ``answer_template``.
* ``tool_call``: reasoning, then one ``<tool_call>{"name": ..., "arguments":
  {...}}</tool_call>`` block (`openmanus_rl.agent.tool_calls`) calling one of
  the env's tools (``EnvSpec.tools``); the tool writes the env action.  The
  tools go to the chat template's ``tools=`` when it renders them, else the
  instructions list them, one signature a line (`EnvTool.signature`).  A
  reply without exactly one block, with a block that is not a JSON call, an
  unknown tool, or arguments that do not fit the tool's schema (missing,
  extra, ill-typed) is invalid, and its feedback names the problem.

New templates register with `register_action_template`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from agentgym.tools import EnvTool, call_for
from openmanus_rl.envs.specs import EnvSpec

from .tool_calls import TOOL_CALL, ToolCallError, read_call, tool_block


@dataclass(frozen=True)
class ParsedAction:
    """``action`` is what goes to the env (None: no parsable action); ``kind`` is "action", "answer" or "invalid";
    ``feedback``: for an invalid reply, the observation that names its problem (empty: the template's
    ``invalid_feedback``)."""

    action: str | None
    kind: str
    thought: str = ""
    feedback: str = ""

    @property
    def valid(self) -> bool:
        return self.action is not None


INVALID = ParsedAction(None, "invalid")


class ActionTemplate(ABC):
    name: ClassVar[str]
    format_pattern: ClassVar[str]

    @abstractmethod
    def format_instructions(self, spec: EnvSpec) -> str:
        """How the model must write its reply."""

    @abstractmethod
    def parse(self, text: str, spec: EnvSpec) -> ParsedAction:
        """The action in ``text``, or `INVALID`."""

    @abstractmethod
    def invalid_feedback(self, spec: EnvSpec) -> str:
        """The observation shown after a reply without a parsable action."""

    @abstractmethod
    def format_reply(self, thought: str, action: str, spec: EnvSpec | None = None) -> str:
        """The reply that `parse` reads as ``action`` with ``thought`` (one line without format markers)."""

    def prompt(self, spec: EnvSpec, native_tools: bool) -> tuple[str, list[dict[str, Any]] | None]:
        """The text appended to the env's instructions, and the tools to give the chat template's ``tools=``
        (None: none); ``native_tools``: whether the chat template renders tools."""
        return self.format_instructions(spec), None


class ReactTemplate(ActionTemplate):
    name = "react"
    format_pattern = r"Thought:\s*\S.*\nAction:\s*\S"
    _action = re.compile(r"Action\s*:[ \t]*([^\n]*)", re.IGNORECASE)
    _thought = re.compile(r"Thought\s*:\s*(.*?)\s*(?:Action\s*:|$)", re.IGNORECASE | re.DOTALL)

    def format_instructions(self, spec: EnvSpec) -> str:
        return (
            "Answer every turn in exactly this format:\n"
            "Thought: <your reasoning about what to do next>\n"
            "Action: <exactly one action>"
        )

    def parse(self, text: str, spec: EnvSpec) -> ParsedAction:
        thought_match = self._thought.search(text)
        thought = thought_match.group(1) if thought_match else ""
        actions = self._action.findall(text)
        if actions:
            action = actions[-1].strip()
            return ParsedAction(action, "action", thought) if action else INVALID
        bare = text.strip()
        if "\n" not in bare and re.fullmatch(spec.action_pattern, bare, re.IGNORECASE):
            return ParsedAction(bare, "action")
        return INVALID

    def invalid_feedback(self, spec: EnvSpec) -> str:
        return (
            "Invalid action: your reply has no 'Action:' line, so nothing happened. "
            "Reply with 'Thought: ...' and then 'Action: <exactly one action>'."
        )

    def format_reply(self, thought: str, action: str, spec: EnvSpec | None = None) -> str:
        return f"Thought: {thought}\nAction: {action}"


class XmlTemplate(ActionTemplate):
    name = "xml"
    format_pattern = r"<think>.*\S.*</think>\s*<(action|answer)>\s*\S.*</\1>"
    _tag = {t: re.compile(rf"<{t}>(.*?)</{t}>", re.DOTALL) for t in ("think", "action", "answer")}

    def format_instructions(self, spec: EnvSpec) -> str:
        text = (
            "Answer every turn in exactly this format:\n"
            "<think>your reasoning about what to do next</think>\n"
            "<action>exactly one action</action>"
        )
        if spec.accepts_answer:
            text += "\nWhen you know the final answer, reply <think>...</think><answer>the answer</answer> instead."
        return text

    def _last(self, tag: str, text: str) -> str | None:
        found = self._tag[tag].findall(text)
        return found[-1].strip() if found else None

    def parse(self, text: str, spec: EnvSpec) -> ParsedAction:
        thought = self._last("think", text) or ""
        if spec.accepts_answer and (answer := self._last("answer", text)):
            return ParsedAction(spec.answer_template.format(answer), "answer", thought)
        action = self._last("action", text)
        return ParsedAction(action, "action", thought) if action else INVALID

    def invalid_feedback(self, spec: EnvSpec) -> str:
        wanted = "<action>...</action>" + (" or <answer>...</answer>" if spec.accepts_answer else "")
        return f"Invalid action: your reply has no {wanted}, so nothing happened. Reply <think>...</think>{wanted}."

    def format_reply(self, thought: str, action: str, spec: EnvSpec | None = None) -> str:
        return f"<think>{thought}</think>\n<action>{action}</action>"


class ToolCallTemplate(ActionTemplate):
    name = "tool_call"
    format_pattern = r"<tool_call>\s*\{.*\}\s*</tool_call>"
    _no_block = "your reply has no <tool_call>...</tool_call> block"
    _block = '<tool_call>{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}</tool_call>'

    @staticmethod
    def _tools(spec: EnvSpec) -> tuple[EnvTool, ...]:
        if not spec.tools:
            raise ValueError(
                f"env {spec.name!r} declares no tools (EnvSpec.tools), so it cannot use the tool_call action format"
            )
        return spec.tools

    def format_instructions(self, spec: EnvSpec) -> str:
        tools = "\n".join(f"- {tool.signature()}" for tool in self._tools(spec))
        return (
            f"You act by calling one of these tools:\n{tools}\n"
            "Answer every turn with your reasoning about what to do next, then exactly one tool call "
            f"on its own line:\n{self._block}\nThe call's result is the next observation."
        )

    def prompt(self, spec: EnvSpec, native_tools: bool) -> tuple[str, list[dict[str, Any]] | None]:
        if not native_tools:
            return self.format_instructions(spec), None
        return (
            "Answer every turn with your reasoning about what to do next, then exactly one call of one of "
            "your tools. The call's result is the next observation.",
            [t.schema() for t in self._tools(spec)],
        )

    def _invalid(self, problem: str) -> ParsedAction:
        return ParsedAction(
            None,
            "invalid",
            feedback=(
                f"Invalid action: {problem}, so nothing happened. Reply with your reasoning, then exactly one "
                f"tool call: {self._block}"
            ),
        )

    def parse(self, text: str, spec: EnvSpec) -> ParsedAction:
        blocks = TOOL_CALL.findall(text)
        if len(blocks) != 1:
            return self._invalid(f"your reply has {len(blocks)} <tool_call> blocks" if blocks else self._no_block)
        try:
            name, arguments = read_call(blocks[0])
        except ToolCallError as exc:
            return self._invalid(str(exc))
        tool = next((t for t in spec.tools if t.name == name), None)
        if tool is None:
            return self._invalid(f"there is no tool {name!r} (the tools: {', '.join(t.name for t in spec.tools)})")
        if (problem := tool.problem(arguments)) is not None:
            return self._invalid(problem)
        return ParsedAction(tool.action_for(arguments), "action", TOOL_CALL.sub("", text).strip())

    def invalid_feedback(self, spec: EnvSpec) -> str:
        return self._invalid(self._no_block).feedback

    def format_reply(self, thought: str, action: str, spec: EnvSpec | None = None) -> str:
        if spec is None:
            raise ValueError("the tool_call format needs the env's spec to write a reply")
        call = call_for(spec.tools, action)
        if call is None:
            raise ValueError(f"no tool of env {spec.name!r} writes the action {action!r}")
        tool, arguments = call
        return f"{thought}\n{tool_block(tool.name, arguments)}"


ACTION_TEMPLATES: dict[str, ActionTemplate] = {}


def register_action_template(template: ActionTemplate, replace: bool = False) -> ActionTemplate:
    if template.name in ACTION_TEMPLATES and not replace:
        raise ValueError(f"action template {template.name!r} is already registered")
    ACTION_TEMPLATES[template.name] = template
    return template


def get_action_template(name: str) -> ActionTemplate:
    try:
        return ACTION_TEMPLATES[name]
    except KeyError:
        raise ValueError(f"unknown action format {name!r}; known: {sorted(ACTION_TEMPLATES)}") from None


register_action_template(ReactTemplate())
register_action_template(XmlTemplate())
register_action_template(ToolCallTemplate())
