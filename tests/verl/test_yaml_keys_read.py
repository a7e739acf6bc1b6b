"""Every key of the trainer YAMLs is read by some code: a key that nothing reads goes, from the YAML and its dataclass.

Each leaf key of ``ppo_trainer.yaml``, ``sft_trainer.yaml`` and ``rm_trainer.yaml`` is mapped to the dataclass field
it loads into (`leaves`); the key is read when the field's name is read in the project's code (`code_reads`): an
attribute load (``cfg.trainer.save_freq``), a string naming it in ``getattr``/``hasattr``, ``.get``/``.pop`` or a
subscript (``agent["n"]``), or a ``${...}`` interpolation of the YAML itself (`interpolated`). Reads in the config
dataclasses' own checks (``validate``, ``__post_init__``) and in the tests do not count; their other methods and
properties (``AgentConfig.servers_by_env``) are how code reads a field. An estimator's options section
(``algorithm.<name>``) reaches its function as keyword arguments, so a field of it is read when that function reads
the parameter of that name (`estimator_reads`).

The scan matches names, not sections: a name that two sections share counts as read for both (the critic's
``loss_scale_factor``, which only the actor read, was found by reading the workers).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import typing
from functools import cache
from pathlib import Path
from typing import Any, Iterator

import pytest
from omegaconf import OmegaConf

from openmanus_rl.agent import AgentConfig
from verl import core_algos
from verl.trainer.ppo.config import PPOConfig
from verl.trainer.rm_trainer import RMConfig
from verl.trainer.sft_trainer import SFTConfig
from verl.utils.yaml_defaults import CONFIG_DIR, compose, yaml_value

REPO = Path(__file__).resolve().parents[2]
CODE_ROOTS = ("verl", "openmanus_rl", "agentgym", "scripts")
ROOTS = {"ppo_trainer": PPOConfig, "sft_trainer": SFTConfig, "rm_trainer": RMConfig}
TYPED_SECTIONS = {"ppo_trainer": {"agent": AgentConfig}}  # sections a root types as a plain dict
STRING_READERS = {"getattr", "hasattr", "get", "pop"}  # calls whose string argument names what they read
CHECKS = {"validate", "__post_init__"}  # a config class's methods that check its fields rather than use them


@dataclasses.dataclass(frozen=True)
class Leaf:
    key: str  # dotted, e.g. "critic.optim.lr"
    owner: type  # the dataclass whose field it loads into
    field: str
    estimator: str | None  # the estimator whose options section holds it, if any


def leaves(
    cls: type, yaml: dict[str, Any], typed: dict[str, type], path: str = "", estimator: str | None = None
) -> Iterator[Leaf]:
    """Every leaf key of ``yaml``, a section that dataclass ``cls`` types (``typed``: the class of a section that a
    field types as a plain dict, by dotted key), with the field it loads into."""
    hints = typing.get_type_hints(cls)
    for key, value in yaml.items():
        where = f"{path}{key}"
        if key not in hints:  # a registry-typed section: an estimator's options
            yield from leaves(cls.section_type(key), value, typed, f"{where}.", key)
            continue
        tp = typed.get(where, hints[key])
        if dataclasses.is_dataclass(tp):
            yield from leaves(tp, value, typed, f"{where}.", estimator)
        else:
            yield Leaf(where, cls, key, estimator)


class Reads(ast.NodeVisitor):
    """The names a module reads: attribute loads, and strings given to `STRING_READERS` or used as a subscript;
    the `CHECKS` methods of the classes named in ``skipped`` are not read."""

    def __init__(self, skipped: set[str]) -> None:
        self.skipped: set[str] = skipped
        self.names: set[str] = set()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name not in self.skipped:
            self.generic_visit(node)
            return
        for item in node.body:
            if not (isinstance(item, ast.FunctionDef) and item.name in CHECKS):
                self.visit(item)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            self.names.add(node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in STRING_READERS:
            self.names.update(_strings(node.args[:2]))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self.names.update(_strings([node.slice]))
        self.generic_visit(node)


def _strings(nodes: list[ast.expr]) -> set[str]:
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


@cache
def config_classes() -> frozenset[str]:
    """The names of the dataclasses that the YAML keys load into, and of their dataclass bases."""
    return frozenset(
        base.__name__
        for config, root in ROOTS.items()
        for leaf in leaves(root, yaml_value(config), TYPED_SECTIONS.get(config, {}))
        for base in leaf.owner.__mro__
        if dataclasses.is_dataclass(base)
    )


@cache
def code_reads() -> frozenset[str]:
    """Every name the project's code reads (`Reads`) outside the checks of `config_classes`."""
    names: set[str] = set()
    for root in CODE_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            reads = Reads(set(config_classes()))
            reads.visit(ast.parse(path.read_text(), str(path)))
            names |= reads.names
    return frozenset(names)


def interpolated(config: str) -> set[str]:
    """The dotted keys that a ``${...}`` in ``<config>.yaml`` reads."""
    return set(re.findall(r"\$\{([\w.]+)\}", (CONFIG_DIR / f"{config}.yaml").read_text()))


@cache
def estimator_reads(name: str) -> frozenset[str]:
    """The parameters of estimator ``name``'s function that its body reads (its options arrive as keywords)."""
    fn = inspect.unwrap(core_algos.get_estimator(name).fn)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return frozenset(loaded & set(inspect.signature(fn).parameters))


def unread(root: type, yaml: dict[str, Any], typed: dict[str, type], interpolations: set[str]) -> list[str]:
    """The leaf keys of ``yaml`` (typed by ``root``, see `leaves`) that no code reads, nor any of
    ``interpolations``, each as ``key (Class.field)``."""
    return [
        f"{leaf.key} ({leaf.owner.__name__}.{leaf.field})"
        for leaf in leaves(root, yaml, typed)
        if leaf.field not in (estimator_reads(leaf.estimator) if leaf.estimator else code_reads())
        and leaf.key not in interpolations
    ]


@pytest.mark.parametrize("config", sorted(ROOTS))
def test_every_yaml_key_is_read_by_some_code(config):
    assert unread(ROOTS[config], yaml_value(config), TYPED_SECTIONS.get(config, {}), interpolated(config)) == []


@dataclasses.dataclass
class _Section:
    save_freq: int
    read_by_no_code: int


@dataclasses.dataclass
class _Root:
    trainer: _Section


def test_the_scan_names_a_key_nothing_reads():
    """A key and field read nowhere is named; read by an interpolation, it is not."""
    yaml = {"trainer": {"save_freq": 1, "read_by_no_code": 2}}
    assert unread(_Root, yaml, {}, set()) == ["trainer.read_by_no_code (_Section.read_by_no_code)"]
    assert unread(_Root, yaml, {}, {"trainer.read_by_no_code"}) == []


def test_the_scan_maps_each_key_to_its_field_and_its_estimator():
    yaml = OmegaConf.to_container(compose("ppo_trainer"), resolve=True)
    found = {leaf.key: leaf for leaf in leaves(PPOConfig, yaml, TYPED_SECTIONS["ppo_trainer"])}
    assert [(f.owner.__name__, f.field, f.estimator) for f in map(found.get, ("critic.ppo_epochs", "agent.n"))] == [
        ("CriticConfig", "ppo_epochs", None),
        ("AgentConfig", "n", None),
    ]
    gigpo = [(f.owner.__name__, f.field, f.estimator) for k, f in found.items() if k.startswith("algorithm.gigpo.")]
    assert gigpo == [
        ("GiGPOOptions", "step_gamma", "gigpo"),
        ("GiGPOOptions", "step_weight", "gigpo"),
        ("GiGPOOptions", "norm_by_std", "gigpo"),
    ]
    assert {"step_gamma", "step_weight", "norm_by_std"} <= estimator_reads("gigpo")
    assert "trainer.threads_per_worker" in interpolated("ppo_trainer")  # actor_rollout_ref.num_threads reads it


def test_reads_are_attribute_loads_and_strings_naming_a_key():
    source = """
        class Skipped:
            def validate(self):
                return self.only_checked

            @property
            def derived(self):
                return self.used_through_a_property
        x = cfg.trainer.save_freq
        cfg.trainer.written = 1
        getattr(cfg, "by_getattr"), agent.get("by_get"), row["by_subscript"]
        print("a plain string")
    """
    reads = Reads({"Skipped"})
    reads.visit(ast.parse(textwrap.dedent(source)))
    assert reads.names == {
        "used_through_a_property",
        "trainer",
        "save_freq",
        "by_getattr",
        "get",
        "by_get",
        "by_subscript",
    }
