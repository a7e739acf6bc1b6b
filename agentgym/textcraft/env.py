"""The TextCraft game: one player, one goal item, an inventory (AgentGym's TextCraft rules, stricter messages).

* ``reset(task_id)`` starts the task's episode with an empty inventory and
  answers the first observation, as upstream::

      Crafting commands:
      craft 4 stick using 2 planks
      ...

      Goal: craft stick.

  The commands are every recipe reachable from the goal (an item's recipes,
  a kind's member recipes, recursively) plus up to ``MAX_DISTRACTORS`` other
  recipes that take one of their ingredients, shuffled.  The draw is seeded
  by the goal, so a task's observation is the same in every process.
  ``start(goal, commands)`` starts a custom episode (``commands`` replaces the
  listed text; crafting still follows the real recipes).
* ``step(action)``; the action is lower-cased, underscores become spaces,
  runs of spaces one, and a trailing full stop is dropped:

  - ``get <count> <item>``: a base item (one that no recipe makes), count 1..``MAX_GET``
    -> ``Got <count> <item>``;
  - ``craft [<count>] <item> using <count> <item>, ...``: one use of a recipe
    of ``<item>``; the ingredients must be the recipe's (any order), with a
    specific member item for a kind (``oak planks`` for ``planks``), held in
    the inventory; ``<count>``, when given, must be what the recipe makes
    -> ``Crafted <count> <item>``;
  - ``inventory`` -> ``Inventory: [oak planks] (2) [stick] (4)`` or
    ``Inventory: You are not carrying anything.``

  Anything else changes nothing and the observation says why (starting
  ``Could not``).  Reward 1.0 and done on the step that puts the goal item in
  the inventory, else 0.0; stepping a finished episode is `EpisodeStateError`.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from ..game import StepResult
from ..open_envs import EpisodeStateError, InvalidRequestError
from .data import Cookbook, Recipe, item_name, parse_craft

MAX_DISTRACTORS = 10
MAX_GET = 1000
ACTIONS = 'the actions are "get <count> <item>", "craft <count> <item> using <count> <item>, ..." and "inventory"'
_GET = re.compile(r"^get (\d{1,9}) (\S.*)$")


class ActionFailed(Exception):
    """An action that changes nothing; its message is the observation."""


def normalize(action: str) -> str:
    """The action as the game reads it (see the module docstring)."""
    return " ".join(action.lower().replace("_", " ").split()).removesuffix(".").rstrip()


def goal_item(book: Cookbook, goal: str) -> str:
    """``goal`` as an item name (``minecraft:stone_bricks`` -> ``stone bricks``); `InvalidRequestError` unless a
    recipe makes it."""
    name = item_name(goal)
    if name not in book.recipes:
        raise InvalidRequestError(f"invalid request: goal {goal!r} is not an item that a recipe makes")
    return name


def first_observation(book: Cookbook, goal: str) -> str:
    """The crafting commands for ``goal`` (with distractors) and the goal line."""
    needed: list[str] = []
    seen: set[str] = set()
    stack = [goal]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for recipe in book.recipes_for(name):
            needed.append(recipe.command)
            stack.extend(n for n, _ in recipe.inputs)
    needed = sorted(set(needed))
    ingredients = {n for name in seen for r in book.recipes_for(name) for n, _ in r.inputs}
    others = sorted({r.command for n in ingredients for r in book.uses.get(n, ())} - set(needed))
    rng = random.Random(goal)
    lines = needed + rng.sample(others, min(len(others), MAX_DISTRACTORS))
    rng.shuffle(lines)
    return "Crafting commands:\n{}\n\nGoal: craft {}.".format("\n".join(lines), goal)


class TextCraftEnv:
    """One player (see the module docstring)."""

    def __init__(self, book: Cookbook) -> None:
        self.book = book
        self.goal = ""
        self.inventory: Counter[str] = Counter()
        self.observation = ""
        self.done = False

    def reset(self, task_id: int) -> str:
        goals = self.book.goals
        if not 0 <= task_id < len(goals):
            raise InvalidRequestError(
                f"invalid request: data_idx {task_id} out of range: expected 0 <= data_idx < {len(goals)}"
            )
        return self.start(goals[task_id])

    def start(self, goal: str, commands: str | None = None) -> str:
        """Start an episode for ``goal`` (an item a recipe makes), listing ``commands`` or the generated ones."""
        name = goal_item(self.book, goal)
        self.goal, self.inventory, self.done = name, Counter(), False
        self.observation = (
            f"Crafting commands:\n{commands}\n\nGoal: craft {name}."
            if commands is not None
            else first_observation(self.book, name)
        )
        return self.observation

    def step(self, action: str) -> StepResult:
        if not self.goal:
            raise EpisodeStateError("no episode yet: POST /reset first")
        if self.done:
            raise EpisodeStateError(f"episode is done (crafted {self.goal}): POST /reset to start a new one")
        text = normalize(action)
        try:
            if text == "inventory":
                observation = self._inventory_text()
            elif text.startswith("get "):
                observation = self._get(text)
            elif text.startswith("craft "):
                observation = self._craft(text)
            else:
                raise ActionFailed(f'Could not execute "{action.strip()}": {ACTIONS}.')
        except ActionFailed as failed:
            observation = str(failed)
        self.done = self.inventory[self.goal] > 0
        self.observation = observation
        return StepResult(observation, 1.0 if self.done else 0.0, self.done)

    # ------------------------------------------------------------------ actions
    def _inventory_text(self) -> str:
        held = " ".join(f"[{item}] ({count})" for item, count in self.inventory.items() if count > 0)
        return f"Inventory: {held or 'You are not carrying anything.'}"

    def _kind_hint(self, name: str) -> str:
        return f"{name} is a kind of item; name a specific one, such as {self.book.kinds[name][0]}"

    def _get(self, text: str) -> str:
        match = _GET.match(text)
        if match is None:
            raise ActionFailed(f'Could not execute "{text}": get takes "get <count> <item>", e.g. "get 2 stone".')
        count, name = int(match.group(1)), match.group(2)
        if name in self.book.kinds:
            raise ActionFailed(f"Could not get {name}: {self._kind_hint(name)}.")
        if name in self.book.recipes:
            raise ActionFailed(f"Could not get {name}: it is crafted, not gathered; craft it with a crafting command.")
        if name not in self.book.base:
            raise ActionFailed(f"Could not find {name}: there is no such item.")
        if not 1 <= count <= MAX_GET:
            raise ActionFailed(f"Could not get {count} {name}: the count must be between 1 and {MAX_GET}.")
        self.inventory[name] += count
        return f"Got {count} {name}"

    def _craft(self, text: str) -> str:
        try:
            count, name, given = parse_craft(text)
        except ValueError as bad:
            raise ActionFailed(f'Could not execute "{text}": {bad}.') from None
        if name in self.book.kinds:
            raise ActionFailed(f"Could not craft {name}: {self._kind_hint(name)}.")
        recipes = self.book.recipes.get(name)
        if not recipes:
            raise ActionFailed(f"Could not craft {name}: no crafting command makes it.")
        for item, _ in given:
            if item in self.book.kinds:
                raise ActionFailed(f"Could not craft {name}: {self._kind_hint(item)}.")
        recipe = next((r for r in recipes if self._matches(r, given)), None)
        if recipe is None:
            using = ", ".join(f"{c} {i}" for i, c in given)
            raise ActionFailed(f"Could not craft {name}: no crafting command for {name} uses {using}.")
        if count is not None and count != recipe.count:
            raise ActionFailed(f"Could not craft {count} {name}: this crafting command makes {recipe.count} {name}.")
        need = Counter()
        for item, c in given:
            need[item] += c
        for item, c in need.items():
            if self.inventory[item] < c:
                raise ActionFailed(
                    f"Could not find enough items to craft {name}: it takes {c} {item} and you have "
                    f"{self.inventory[item]}."
                )
        self.inventory.subtract(need)
        self.inventory += Counter()  # drop the items used up
        self.inventory[name] += recipe.count
        return f"Crafted {recipe.count} {name}"

    def _matches(self, recipe: Recipe, given: list[tuple[str, int]]) -> bool:
        """Whether ``given`` is ``recipe``'s ingredients, each kind named by one of its members."""
        if len(given) != len(recipe.inputs):
            return False
        free = list(given)
        for wanted, count in recipe.inputs:
            hit = next(
                (g for g in free if g[1] == count and (g[0] == wanted or self.book.kind_of.get(g[0]) == wanted)), None
            )
            if hit is None:
                return False
            free.remove(hit)
        return True
