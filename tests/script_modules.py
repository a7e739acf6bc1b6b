"""The project's scripts (``scripts/<name>.py``) loaded as modules, for tests that call their functions."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a freshly executed module (not the one in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm_start_args(**given: Any) -> argparse.Namespace:
    """The arguments ``scripts/warm_start.py`` keys its cache on: 4 demonstrations and 2 dev ones of WebShop in
    the react format by the noiseless expert, no overrides and no program, with ``given`` in their place."""
    args = dict(
        env_name="webshop",
        action_format="react",
        n_demos=4,
        n_dev_demos=2,
        noise=0.0,
        agent_overrides=[],
        sft_overrides=[],
        program=None,
    )
    return argparse.Namespace(**{**args, **given})
