"""The engine (`verl/`) knows no agent and no env: none of its modules imports `openmanus_rl` or `agentgym`; and
inside it, no module imports from a layer above its own (utils, protocol and core_algos < single_controller <
workers < trainer)."""

import ast
from pathlib import Path

import pytest
from import_graph import runtime_imports

from verl.trainer.ppo.rollout import RolloutPlugin, load_rollout_plugin
from verl.utils.typed_config import ConfigError

VERL = Path(__file__).resolve().parents[2] / "verl"
FORBIDDEN = {"openmanus_rl", "agentgym"}


def imported_packages(path: Path) -> set[str]:
    """Top-level package of every absolute import in ``path`` (relative imports stay inside `verl`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_engine_module_imports_the_agent_or_an_env():
    offenders = {
        str(p.relative_to(VERL.parent)): sorted(imported_packages(p) & FORBIDDEN) for p in sorted(VERL.rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(offenders) > 40  # the walk saw the whole engine


LAYERS = {"utils": 0, "protocol": 0, "core_algos": 0, "single_controller": 1, "workers": 2, "trainer": 3}


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if parts[0] == "verl" and len(parts) > 1 else None


def test_no_engine_module_imports_from_a_layer_above_its_own():
    upward = {
        (str(p.relative_to(VERL.parent)), module)
        for p in sorted(VERL.rglob("*.py"))
        if layer(".".join(p.relative_to(VERL.parent).with_suffix("").parts)) is not None
        for module in runtime_imports(p, VERL)
        if (layer(module) or 0) > layer(".".join(p.relative_to(VERL.parent).with_suffix("").parts))
    }
    assert upward == set()


def test_the_layer_walk_sees_function_imports_and_skips_type_only_ones(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from verl import core_algos\n"
        "def f():\n    from verl.workers.config import ActorConfig\n"
    )
    assert runtime_imports(f) == {"typing", "verl.workers.config"}
    assert (layer("verl.utils.typed_config"), layer("verl.trainer.ppo"), layer("numpy")) == (0, 3, None)
    assert layer("verl.core_algos") == 0 and layer("verl.workers.actor") == 2


def test_the_walk_catches_both_import_forms(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "import os\nimport agentgym.server as s\nfrom openmanus_rl.agent import AgentConfig\nfrom . import sibling\n"
    )
    assert imported_packages(f) == {"os", "agentgym", "openmanus_rl"}


def test_rollout_plugins_by_builtin_name_entry_point_and_dotted_path():
    assert isinstance(load_rollout_plugin("single_turn"), RolloutPlugin)
    assert isinstance(load_rollout_plugin("agent"), RolloutPlugin)  # the `verl.rollouts` entry point in pyproject.toml
    assert load_rollout_plugin("verl.trainer.ppo.single_turn:PLUGIN") is load_rollout_plugin("single_turn")
    with pytest.raises(
        ConfigError, match=r"data.rollout: unknown rollout 'chat'; known: \['agent', 'gateway', 'single_turn'\]"
    ):
        load_rollout_plugin("chat")
    with pytest.raises(ConfigError, match=r"data.rollout='verl.protocol:DataProto' is a type, not a RolloutPlugin"):
        load_rollout_plugin("verl.protocol:DataProto")
    with pytest.raises(ConfigError, match=r"data.rollout 'no_such_module:PLUGIN' cannot be loaded: No module named"):
        load_rollout_plugin("no_such_module:PLUGIN")
