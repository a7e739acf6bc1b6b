"""Action templates: how the model is asked to answer, and how its reply is parsed.

A template owns both sides, so the prompt and the parser always agree:
``format_instructions(spec)`` is the text appended to the env's instructions,
``parse(text, spec)`` reads the reply, ``invalid_feedback`` is the
observation the model gets when its reply holds no action, and
``format_pattern`` is the regex of a well-formed reply (the default pattern of
the format reward).

* ``react``: ``Thought: ...`` then ``Action: ...``.  The action is the rest of
  the line after the last ``Action:``; a reply without ``Action:`` is taken as
  the action when, stripped, it fully matches the env's action pattern (the
  upstream clients' fallback for bare ``search[...]`` replies).
* ``xml``: ``<think>...</think>`` then ``<action>...</action>``; for envs that
  take final answers (``EnvSpec.accepts_answer``) also ``<answer>...</answer>``,
  which wins over an action and is sent through the spec's ``answer_template``.

New templates register with `register_action_template`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from openmanus_rl.envs.specs import EnvSpec


@dataclass(frozen=True)
class ParsedAction:
    """``action`` is what goes to the env (None: no parsable action); ``kind`` is "action", "answer" or "invalid"."""

    action: str | None
    kind: str
    thought: str = ""

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


class ReactTemplate(ActionTemplate):
    name = "react"
    format_pattern = r"Thought:\s*\S.*\nAction:\s*\S"
    _action = re.compile(r"Action\s*:[ \t]*([^\n]*)", re.IGNORECASE)
    _thought = re.compile(r"Thought\s*:\s*(.*?)\s*(?:Action\s*:|$)", re.IGNORECASE | re.DOTALL)

    def format_instructions(self, spec: EnvSpec) -> str:
        return ("Answer every turn in exactly this format:\n"
                "Thought: <your reasoning about what to do next>\n"
                "Action: <exactly one action>")

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
        return ("Invalid action: your reply has no 'Action:' line, so nothing happened. "
                "Reply with 'Thought: ...' and then 'Action: <exactly one action>'.")


class XmlTemplate(ActionTemplate):
    name = "xml"
    format_pattern = r"<think>.*\S.*</think>\s*<(action|answer)>\s*\S.*</\1>"
    _tag = {t: re.compile(rf"<{t}>(.*?)</{t}>", re.DOTALL) for t in ("think", "action", "answer")}

    def format_instructions(self, spec: EnvSpec) -> str:
        text = ("Answer every turn in exactly this format:\n"
                "<think>your reasoning about what to do next</think>\n"
                "<action>exactly one action</action>")
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
