"""Plan the actions that craft a goal item from an empty inventory, by walking a recipe tree.

`plan(goal, recipes_for)` works on any recipe source: ``recipes_for(name)``
gives the recipes that make ``name`` (for a kind, those of its members; an
empty sequence means a base item, fetched with ``get``).  It obtains an item
depth first: the first recipe of it whose ingredients can all be obtained
without a cycle, enough crafts of it for the count needed, each ingredient
obtained before the crafts and set aside for them.  Kinds are satisfied with
the member its chosen recipe makes.  The actions are ``get <n> <item>`` and
one ``craft <count> <item> using <count> <item>, ...`` per use of a recipe.

`oracle(task_id)` is the plan over the real crafting tree (`data.cookbook`):
the reference solution the tests play.
"""

from __future__ import annotations

from collections import Counter
from math import ceil
from typing import Callable, Sequence

from .data import Recipe, cookbook, craft_command


class NoPlan(ValueError):
    """The goal cannot be obtained from the given recipes."""


def plan(goal: str, recipes_for: Callable[[str], Sequence[Recipe]]) -> list[str]:
    """The actions that leave one ``goal`` in an empty inventory (see the module docstring); `NoPlan` if none."""
    actions: list[str] = []
    held: Counter[str] = Counter()  # items obtained and not set aside

    def obtainable(name: str, path: frozenset[str]) -> bool:
        recipes = recipes_for(name)
        return not recipes or any(usable(r, path | {name}) for r in recipes)

    def usable(recipe: Recipe, path: frozenset[str]) -> bool:
        return all(n not in path and obtainable(n, path) for n, _ in recipe.inputs)

    def obtain(name: str, count: int, path: frozenset[str]) -> str:
        recipes = recipes_for(name)
        if not recipes:
            if held[name] < count:
                actions.append(f"get {count - held[name]} {name}")
                held[name] = count
            return name
        done = next((r.output for r in recipes if held[r.output] >= count), None)
        if done is not None:
            return done
        recipe = next((r for r in recipes if usable(r, path | {name})), None)
        if recipe is None:
            raise NoPlan(f"no recipe for {name} can be followed")
        crafts = ceil((count - held[recipe.output]) / recipe.count)
        used = []
        for ingredient, per_craft in recipe.inputs:
            item = obtain(ingredient, per_craft * crafts, path | {name})
            held[item] -= per_craft * crafts
            used.append((item, per_craft))
        actions.extend([craft_command(recipe.count, recipe.output, used)] * crafts)
        held[recipe.output] += recipe.count * crafts
        return recipe.output

    obtain(goal, 1, frozenset())
    return actions


def oracle(task_id: int) -> list[str]:
    """The actions that solve task ``task_id``, planned over the real crafting tree."""
    book = cookbook()
    return plan(book.goals[task_id], book.recipes_for)
