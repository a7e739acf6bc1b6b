"""Every environment by name: each package ``agentgym/<env>/`` with a ``spec.toml`` (`agentgym.spec.load_spec`).

Adding an environment is adding that package (its spec, and its server app,
task lists and expert where it has them); the launcher, the data preparation,
the agent and the expert registry find it here. `register_env` adds a spec
from outside the package tree.
"""

from __future__ import annotations

from pathlib import Path

from .spec import EnvSpec, load_spec

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
    for path in sorted(Path(__file__).parent.glob("*/spec.toml")):
        spec = load_spec(path)
        if spec.name != path.parent.name:
            raise ValueError(
                f"agentgym/{path.parent.name}/spec.toml declares env {spec.name!r}; the package must carry its name"
            )
        register_env(spec)


_discover()
