"""Each env is one package, agentgym/<env>/, whose spec.toml the registry finds; specs load light."""

import subprocess
import sys
from pathlib import Path

import pytest

from agentgym import registry
from agentgym.launcher import ENVS
from agentgym.registry import ENV_SPECS, get_env_spec
from agentgym.spec import EnvSpec, load_object, load_spec
from agentgym.tools import EnvTool

KNOWN = ["alfworld", "babyai", "frozenlake", "maze", "sciworld", "sokoban", "sqlgym", "textcraft", "webshop", "wordle"]
AGENTGYM = Path(registry.__file__).parent  # the agentgym package imported, wherever it lives


def test_every_env_package_is_found_by_name():
    packages = sorted(spec.parent.name for spec in AGENTGYM.glob("*/spec.toml"))
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


GUESS_TOML = """
# a comment
name = "guess"
family = "B"
reset_field = "data_idx"
action_pattern = '(guess )?\\d+'
instructions = \"\"\"
Find the number.
One guess a turn, \\
from 1 to 100.\"\"\"
probe_actions = ["guess 50", "pass"]
reset_extra = { mode = "easy" }
max_turns = 8

[[tools]]
name = "guess"
description = "Guess the number."
action = "guess {number}"
[tools.properties.number]
type = "integer"
description = "your guess"
"""


def test_a_spec_file_loads_into_the_spec_it_declares(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(GUESS_TOML)
    number = {"type": "integer", "description": "your guess"}
    assert load_spec(path) == EnvSpec(
        name="guess",
        family="B",
        reset_field="data_idx",
        action_pattern=r"(guess )?\d+",
        instructions="Find the number.\nOne guess a turn, from 1 to 100.",
        probe_actions=("guess 50", "pass"),
        reset_extra={"mode": "easy"},
        max_turns=8,
        tools=(EnvTool("guess", "Guess the number.", "guess {number}", {"number": number}),),
    )


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda t: t.replace("max_turns", "max_turn"), r"unknown keys \['max_turn'\], missing keys \[\]"),
        (lambda t: t.replace('reset_field = "data_idx"\n', ""), r"unknown keys \[\], missing keys \['reset_field'\]"),
        (lambda t: t.replace('name = "guess"\n', "name = guess\n", 1), r"not valid TOML: .*line 3"),
        (
            lambda t: t.replace("guess {number}", "guess {n}"),
            r"a \[\[tools\]\] table: tool 'guess': the action 'guess \{n\}' must use each argument \['number'\]",
        ),
        (
            lambda t: t.replace("[tools.properties", 'color = "red"\n[tools.properties'),
            r"a \[\[tools\]\] table: .*unexpected keyword argument 'color'",
        ),
    ],
    ids=["unknown key", "missing key", "not TOML", "tool action", "tool key"],
)
def test_a_bad_spec_file_is_an_error_naming_the_file_and_the_problem(tmp_path, edit, problem):
    path = tmp_path / "spec.toml"
    path.write_text(edit(GUESS_TOML))
    with pytest.raises(ValueError, match=rf"^{tmp_path}/spec.toml: {problem}"):
        load_spec(path)
