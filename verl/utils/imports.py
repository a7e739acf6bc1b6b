"""Loading what a config names as ``package.module:attribute`` (a rollout plugin, an agent program, the module
of an advantage estimator or a reward), with one rule for the import path and one error."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any


def import_named_module(target: str, what: str) -> ModuleType:
    """The module part of ``target`` (``package.module:attribute``), imported as under ``python -m``: the working
    directory is on the import path, so a run started in a repository finds that repository's packages
    (``examples``). ValueError ``"<what> '<target>' cannot be loaded: ..."`` when it has no module part or the
    import fails."""
    module, _, _ = target.partition(":")
    if not module:
        raise ValueError(f"{what} {target!r} cannot be loaded: expected package.module:attribute")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"{what} {target!r} cannot be loaded: {exc}") from None


def load_target(target: str, what: str) -> Any:
    """The attribute ``package.module:attribute`` names (`import_named_module`'s rule and error; also when the
    module lacks the attribute or ``target`` names none)."""
    module = import_named_module(target, what)
    attribute = target.partition(":")[2]
    if not attribute or not hasattr(module, attribute):
        raise ValueError(f"{what} {target!r} cannot be loaded: {module.__name__} has no attribute {attribute!r}")
    return getattr(module, attribute)


def import_registering_module(spec: str, what: str) -> tuple[str, str]:
    """``(module, name)`` of a registry entry named as ``name`` or ``package.module:name``; in the second form
    the module is imported first (`import_named_module`), so that it registers ``name``. ``module`` is ""
    for a bare name."""
    module, sep, name = spec.partition(":")
    if not sep:
        return "", spec
    import_named_module(spec, what)
    return module, name
