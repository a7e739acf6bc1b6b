"""A scripted TextCraft player that reads only the observations the agent gets.

`TextCraftExpert` never sees the server's crafting tree, inventory or reward.
On an observation that lists crafting commands (the first of an episode:
``Crafting commands:`` lines, a blank line, ``Goal: craft <item>.``) it reads
the listed commands and the goal and plans every action at once with
`agentgym.textcraft.plan.plan` over the listed commands only:

* an item's recipes are the listed commands that make it, in listing order;
* a name that no listed command makes but that ends the name of items some
  listed commands make without needing it, directly or through their
  ingredients (``planks`` for ``oak planks``, but not ``glass`` for ``red
  stained glass``, which takes glass) is a kind: those commands make it, and
  the crafts name the member made;
* any other name is a base item, fetched with ``get``.

Each later turn plays the next planned action (distractor commands are never
used).  With no plan (no goal in sight, or nothing to follow) or once the plan
is played, it checks ``inventory``.  ``noise`` in [0, 1] makes a slower
player: with that probability (seeded by ``seed``) it checks ``inventory``
instead of the next planned action, but only while the rest of the plan still
fits in ``max_steps`` actions.  ``noise=0`` is deterministic.
"""

from __future__ import annotations

import re

from ..expert import BudgetedExpert
from .data import Recipe, parse_craft
from .plan import NoPlan, plan

_GOAL = re.compile(r"^Goal: craft (.+?)\.?$", re.MULTILINE)
_HEADER = "Crafting commands:"


def read_commands(observation: str) -> tuple[list[Recipe], str | None]:
    """The crafting commands listed in ``observation`` (lines that do not parse are skipped) and its goal item."""
    recipes = []
    if _HEADER in observation:
        listing = observation.split(_HEADER, 1)[1].split("\n\n", 1)[0]
        for line in listing.strip().splitlines():
            try:
                count, output, inputs = parse_craft(" ".join(line.lower().split()))
            except ValueError:
                continue
            if count is not None:
                recipes.append(Recipe(output, count, tuple(inputs)))
    goal = _GOAL.search(observation)
    return recipes, (goal.group(1).strip().lower() if goal else None)


def plan_from_commands(recipes: list[Recipe], goal: str) -> list[str]:
    """The actions that craft ``goal`` with the listed ``recipes`` (see the module docstring); `NoPlan` if none."""
    by_output: dict[str, list[Recipe]] = {}
    for recipe in recipes:
        by_output.setdefault(recipe.output, []).append(recipe)

    def takes(recipe: Recipe, name: str, seen: set[str]) -> bool:
        """Whether ``recipe`` needs ``name``, directly or through the listed recipes of its ingredients."""
        for ingredient, _ in recipe.inputs:
            if ingredient == name:
                return True
            if ingredient not in seen:
                seen.add(ingredient)
                if any(takes(r, name, seen) for r in by_output.get(ingredient, ())):
                    return True
        return False

    def recipes_for(name: str) -> list[Recipe]:
        return by_output.get(name) or [
            r for r in recipes if r.output.endswith(" " + name) and not takes(r, name, set())
        ]

    return plan(goal, recipes_for)


class TextCraftExpert(BudgetedExpert):
    """Plans from the listed crafting commands and plays the plan (see the module docstring)."""

    env_name = "textcraft"
    default_max_steps = 50

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.goal: str | None = None
        self.plan: list[str] | None = None  # actions not yet played; None: nothing to follow

    def act(self, observation: str) -> str:
        if _HEADER in observation:
            recipes, self.goal = read_commands(observation)
            try:
                self.plan = plan_from_commands(recipes, self.goal) if self.goal else None
            except NoPlan:
                self.plan = None
        if not self.plan:
            why = "I cannot plan from what I see" if self.plan is None else f"I have played my plan for {self.goal}"
            return self._do("inventory", f"{why}, so I check what I hold.")
        fits = self.max_steps - self.steps - 1 >= len(self.plan)  # the plan still fits after a check now
        if self.noise > 0 and fits and self.rng.random() < self.noise:
            return self._do("inventory", "Before going on, I check what I hold.")
        action = self.plan.pop(0)
        return self._do(action, self._thought(action))

    def _thought(self, action: str) -> str:
        if action.startswith("get "):
            item = action.split(" ", 2)[2]
            return f"No crafting command makes {item}, so I get it."
        _, output, _ = parse_craft(action)
        if output == self.goal:
            return f"I hold the ingredients for {output}, the goal, so I craft it."
        return f"I need {output} on the way to {self.goal}, and I hold its ingredients, so I craft it."
