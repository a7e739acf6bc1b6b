"""Every environment by name: each package ``agentgym/<env>/`` with a ``spec.py`` holding ``SPEC = EnvSpec(...)``.

Adding an environment is adding that package (its spec, and its server app,
task lists and expert where it has them); the launcher, the data preparation,
the agent and the expert registry find it here. `register_env` adds a spec
from outside the package tree.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from .spec import EnvSpec

ENV_SPECS: dict[str, EnvSpec] = {}


def register_env(spec: EnvSpec, replace: bool = False) -> EnvSpec:
    """Add ``spec`` to the registry (``replace`` to overwrite an existing name)."""
    if spec.family not in ("A", "B"):
        raise ValueError(f"env {spec.name!r}: family must be 'A' or 'B', got {spec.family!r}")
    if spec.name in ENV_SPECS and not replace:
        raise ValueError(f"env {spec.name!r} is already registered")
    ENV_SPECS[spec.name] = spec
    return spec


def get_env_spec(name: str) -> EnvSpec:
    try:
        return ENV_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown env {name!r}; registered envs: {sorted(ENV_SPECS)}") from None


def _discover() -> None:
    root = Path(__file__).parent
    for package in sorted(m.name for m in pkgutil.iter_modules([str(root)]) if m.ispkg):
        if (root / package / "spec.py").is_file():
            spec = importlib.import_module(f"{__package__}.{package}.spec").SPEC
            if spec.name != package:
                raise ValueError(
                    f"agentgym/{package}/spec.py declares env {spec.name!r}; the package must carry its name"
                )
            register_env(spec)


_discover()
