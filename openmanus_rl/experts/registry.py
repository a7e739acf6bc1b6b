"""Expert policies, registered by env name, and how their actions become model replies.

An `Expert` (`agentgym.expert`; each env's lives in ``agentgym/<env>/expert.py``) plays one episode at a
time: `Expert.reset` starts a new one, `Expert.act` maps the observation text (exactly what the agent would
see) to the env action and leaves a short reasoning line in ``last_thought``.  `reply` and `format_reply`
write that thought and action as the model's reply in an action template's format
(`ActionTemplate.format_reply`), so the template's own ``parse`` reads the
same action back:

* ``react``: ``Thought: <thought>`` newline ``Action: <action>``;
* ``xml``: ``<think><thought></think>`` newline ``<action><action></action>``;
* ``tool_call``: ``<thought>`` newline ``<tool_call>{"name": <tool>, "arguments":
  {...}}</tool_call>``, the first of the env's tools that writes the action.

An env names its expert in its spec (``expert = "module:factory"`` in
``agentgym/<env>/spec.toml``); `register_expert` adds or replaces one from
outside; `get_expert` builds one.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

from agentgym.expert import Expert
from agentgym.spec import load_object
from openmanus_rl.agent.templates import ActionTemplate, get_action_template
from openmanus_rl.envs.specs import ENV_SPECS, EnvSpec

ExpertFactory = Callable[..., Expert]
EXPERTS: dict[str, ExpertFactory] = {}


def register_expert(name: str, factory: ExpertFactory, replace: bool = False) -> ExpertFactory:
    """Register ``factory`` (called with `get_expert`'s keyword arguments) as the expert of env ``name``."""
    if name in EXPERTS and not replace:
        raise ValueError(f"an expert for env {name!r} is already registered")
    EXPERTS[name] = factory
    return factory


def _factory(env_name: str) -> ExpertFactory:
    if env_name not in EXPERTS:
        spec = ENV_SPECS.get(env_name)
        if spec is None or not spec.expert:
            known = sorted({*EXPERTS, *(name for name, s in ENV_SPECS.items() if s.expert)})
            raise ValueError(f"no expert for env {env_name!r}; experts exist for: {known}")
        EXPERTS[env_name] = load_object(spec.expert)
    return EXPERTS[env_name]


def get_expert(env_name: str, **kwargs: Any) -> Expert:
    """A new expert for ``env_name``, built by its factory with ``kwargs`` (e.g. ``noise``, ``seed``)."""
    return _factory(env_name)(**kwargs)


def expert_takes(env_name: str, option: str) -> bool:
    """Whether ``env_name``'s expert factory takes the keyword argument ``option`` (only the experts that plan
    within a move budget take ``max_steps``)."""
    return option in inspect.signature(_factory(env_name)).parameters


_THOUGHT_BANNED = re.compile(r"action\s*:|thought\s*:|</?(think|action|answer|tool_call)>", re.IGNORECASE)


def _clean_thought(thought: str) -> str:
    """One line that no template could mistake for an action marker."""
    text = _THOUGHT_BANNED.sub(" ", " ".join(thought.split()))
    return " ".join(text.split()) or "I decide the next step."


def reply(expert: Expert, observation: str, template: ActionTemplate | str, spec: EnvSpec | None = None) -> str:
    """``expert.act(observation)``, written with its thought as a reply in ``template``'s format (`format_reply`)."""
    action = expert.act(observation)
    return format_reply(template, action, expert.last_thought, spec)


def format_reply(template: ActionTemplate | str, action: str, thought: str = "", spec: EnvSpec | None = None) -> str:
    """``action`` (with ``thought``) as a reply in ``template``'s format (an object or a registered name), written
    by the template's ``format_reply`` (``tool_call`` needs ``spec``, to find the tool that writes ``action``).

    With ``spec``, checks that ``template.parse(reply, spec)`` gives ``action`` back and raises ValueError if not.
    """
    template = get_action_template(template) if isinstance(template, str) else template
    action = action.strip()
    if not action or "\n" in action:
        raise ValueError(f"an expert action must be one non-empty line, got {action!r}")
    reply = template.format_reply(_clean_thought(thought), action, spec)
    if spec is not None:
        parsed = template.parse(reply, spec)
        if parsed.action != action:
            raise ValueError(
                f"template {template.name!r} reads {parsed.action!r} from the expert reply {reply!r}, not {action!r}"
            )
    return reply
