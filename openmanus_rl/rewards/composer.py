"""`RewardComposer`: a weighted sum of reward components with its breakdown.

``total = sum(weight_i * value_i)``; the breakdown maps each component's name
to its weighted share ``weight_i * value_i`` (so the shares add up to the total).

Config (``AgentConfig.reward_components``): a mapping name -> weight, or
name -> options ``{"weight": w, "type": t, ...}``; the type defaults to the
name and the other options go to the component (see `components`)::

    {"goal": 1.0,
     "length": {"weight": 0.1, "max_length": 400, "kind": "quadratic"},
     "format": {"weight": 0.2, "patterns": {"webshop": ["Action: (search|click)\\\\["]}}}

A format component's ``patterns`` is a list, or a mapping env name -> list
(with an optional ``"default"`` entry); without one, the action template's
own well-formedness pattern is used.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .components import EpisodeOutcome, FormatReward, GoalReward, RewardComponent, load_component


def _format_patterns(patterns: Any, env_name: str, default: Sequence[str]) -> list[str]:
    if patterns is None:
        return list(default)
    if isinstance(patterns, Mapping):
        chosen = patterns.get(env_name, patterns.get("default"))
        return list(default) if chosen is None else list(chosen)
    return list(patterns)


class RewardComposer:
    def __init__(self, components: list[tuple[str, float, RewardComponent]]) -> None:
        self.components = components

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.components]

    def __call__(self, outcome: EpisodeOutcome) -> tuple[float, dict[str, float]]:
        """``(total, {name: weight * value})``."""
        breakdown = {name: weight * component(outcome) for name, weight, component in self.components}
        return sum(breakdown.values()), breakdown

    def paid_per_turn(self, running: Sequence[float], reward_scale: float) -> list[float]:
        """What the total earns turn by turn, before the episode ends: with ``s_k`` the env's running reward
        after turn ``k`` (``s_{-1} = 0``), turn ``k`` is paid ``sum_goal w * (s_k - s_{k-1}) / reward_scale``
        over the goal components in ``reward`` mode (weight ``w``); the other components (success-mode goal,
        length, format) are judged on the whole episode, so they pay nothing here."""
        weight = sum(w for _, w, c in self.components if isinstance(c, GoalReward) and c.mode == "reward")
        previous = [0.0, *running[:-1]]
        return [weight * (s - p) / reward_scale for s, p in zip(running, previous)]

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], env_name: str, default_format_patterns: Sequence[str] = ()
    ) -> "RewardComposer":
        """Build from ``AgentConfig.reward_components``; ValueError naming the bad entry."""
        if not config:
            raise ValueError("reward_components is empty: give at least one component, e.g. {'goal': 1.0}")
        components = []
        for name, entry in config.items():
            options = dict(entry) if isinstance(entry, Mapping) else {"weight": entry}
            kind = options.pop("type", name)
            weight = options.pop("weight", 1.0)
            try:
                component_type = load_component(str(kind))
            except ValueError as exc:
                raise ValueError(f"reward component {name!r}: {exc}") from None
            if isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise ValueError(f"reward component {name!r}: weight must be a number, got {weight!r}")
            if issubclass(component_type, FormatReward):
                options["patterns"] = _format_patterns(options.get("patterns"), env_name, default_format_patterns)
            try:
                component = component_type(**options)
            except TypeError as exc:
                raise ValueError(f"reward component {name!r} ({kind}): {exc}") from None
            except ValueError as exc:
                raise ValueError(f"reward component {name!r}: {exc}") from None
            components.append((str(name), float(weight), component))
        return cls(components)
