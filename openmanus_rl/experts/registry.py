"""Expert policies, registered by env name, and how their actions become model replies.

An `Expert` plays one episode at a time: `Expert.reset` starts a new one,
`Expert.act` maps the observation text (exactly what the agent would see)
to the env action (``search[red shoes]``, ``click[buy now]``...) and leaves a
short reasoning line in ``last_thought``.  `format_reply` writes that
thought and action as the model's reply in an action template's format
(`ActionTemplate.format_reply`), so the template's own ``parse`` reads the
same action back:

* ``react``: ``Thought: <thought>`` newline ``Action: <action>``;
* ``xml``: ``<think><thought></think>`` newline ``<action><action></action>``;
* ``tool_call``: ``<thought>`` newline ``<tool_call>{"name": <tool>, "arguments":
  {...}}</tool_call>``, the first of the env's tools that writes the action.

An env names its expert in its spec (``expert = "module:factory"`` in
``agentgym/<env>/spec.py``); `register_expert` adds or replaces one from
outside; `get_expert` builds one.
"""

from __future__ import annotations

import inspect
import random
import re
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar

from agentgym.spec import load_object
from openmanus_rl.agent.templates import ActionTemplate, get_action_template
from openmanus_rl.envs.specs import ENV_SPECS, EnvSpec


class Expert(ABC):
    """A scripted policy for one env: ``reset()``, then ``act(observation)`` once per turn.

    ``noise`` in [0, 1] is how often the expert strays from its best action (each expert says how), drawn
    from ``rng``, seeded by ``seed``; ``noise=0`` is deterministic.
    """

    env_name: ClassVar[str] = ""

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        self.noise, self.seed, self.rng = noise, seed, random.Random(seed)
        self.last_thought = ""
        self.steps = 0

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (``seed``: re-seed the expert's randomness)."""
        self.last_thought = ""
        self.steps = 0
        if seed is not None:
            self.seed, self.rng = seed, random.Random(seed)

    def noisy(self) -> bool:
        """Whether to stray this time: true with probability ``noise``."""
        return self.noise > 0 and self.rng.random() < self.noise

    def _do(self, action: str, thought: str) -> str:
        """Count a step, keep its thought, and return ``action`` (what `act` ends with)."""
        self.steps += 1
        self.last_thought = thought
        return action

    @abstractmethod
    def act(self, observation: str) -> str:
        """The env action for ``observation``; sets ``last_thought``."""

    def reply(self, observation: str, template: ActionTemplate | str, spec: EnvSpec | None = None) -> str:
        """`act` on ``observation`` and write thought and action as a reply in ``template``'s format."""
        action = self.act(observation)
        return format_reply(template, action, self.last_thought, spec)


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
