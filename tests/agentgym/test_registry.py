"""Each env is one package, agentgym/<env>/, whose spec.py the registry finds; specs import light."""

import subprocess
import sys
from pathlib import Path

import pytest

from agentgym import registry
from agentgym.launcher import ENVS
from agentgym.registry import ENV_SPECS, get_env_spec
from agentgym.spec import load_object

KNOWN = ["alfworld", "babyai", "frozenlake", "maze", "sciworld", "sokoban", "sqlgym", "textcraft", "webshop", "wordle"]
AGENTGYM = Path(registry.__file__).parent  # the agentgym package imported, wherever it lives


def test_every_env_package_is_found_by_name():
    packages = sorted(spec.parent.name for spec in AGENTGYM.glob("*/spec.py"))
    assert set(KNOWN) <= set(packages) <= set(ENV_SPECS)  # other tests register toy envs of their own here
    assert all(get_env_spec(name).name == name for name in packages)
    with pytest.raises(ValueError, match=r"unknown env 'chess'; registered envs: \['alfworld', 'babyai'"):
        get_env_spec("chess")


def test_webshop_declares_its_app_tasks_and_expert_in_one_place():
    spec = get_env_spec("webshop")
    assert (spec.app, spec.tasks, spec.expert) == (
        "agentgym.webshop.app",
        "agentgym.webshop.data:task_list",
        "agentgym.webshop.expert:WebShopExpert",
    )
    assert {name: ENVS[name] for name in KNOWN if name in ENVS} == {
        "alfworld": "agentgym.alfworld.app",
        "babyai": "agentgym.babyai.app",
        "frozenlake": "agentgym.frozenlake.app",
        "maze": "agentgym.lmrlgym.app",
        "sciworld": "agentgym.sciworld.app",
        "sokoban": "agentgym.sokoban.app",
        "textcraft": "agentgym.textcraft.app",
        "webshop": "agentgym.webshop.app",
        "wordle": "agentgym.lmrlgym.app",
    }  # what declares an app
    assert load_object(spec.expert).__name__ == "WebShopExpert"
    assert get_env_spec("sqlgym").app is None


def test_specs_import_without_servers_or_heavy_extras():
    code = (
        f"import sys, agentgym.registry as r; assert set({KNOWN!r}) <= set(r.ENV_SPECS); "
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'bm25s', 'torch', 'agentgym.webshop.app', "
        "'openmanus_rl') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
