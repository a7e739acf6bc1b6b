"""The trainer YAML files (``verl/trainer/config/<name>.yaml``): the one place a default value is written.

`yaml_value` reads one value by dotted key, interpolations (``${trainer.seed}``) resolved;
`compose` gives a whole file with Hydra-syntax overrides, as the entry points load it;
`add_yaml_argument` makes a YAML value a command-line flag's default. The dataclasses that type
the files take their defaults through `verl.utils.typed_config.defaults_from`.
"""

from __future__ import annotations

import argparse
import copy
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from omegaconf import DictConfig

CONFIG_DIR = Path(__file__).resolve().parents[1] / "trainer" / "config"


@functools.cache
def _resolved(config: str) -> dict[str, Any]:
    """The file's values, without its Hydra ``defaults`` list (the presets `compose` may lay over them)."""
    from omegaconf import OmegaConf

    raw = OmegaConf.load(CONFIG_DIR / f"{config}.yaml")
    raw.pop("defaults", None)
    return OmegaConf.to_container(raw, resolve=True)


def yaml_value(config: str, key: str = "") -> Any:
    """A fresh copy of ``key``'s value in ``<config>.yaml`` (dotted, e.g. ``agent.max_prompt_length``; ``""``:
    the whole file), interpolations resolved. Raises KeyError naming the file and key when it is absent."""
    value: Any = _resolved(config)
    for part in key.split(".") if key else ():
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"{config}.yaml has no key {key!r}")
        value = value[part]
    return copy.deepcopy(value)


def compose(config: str, overrides: Sequence[str] = ()) -> DictConfig:
    """``<config>.yaml`` with Hydra-syntax overrides (``key=value``, ``+new.key=value``, and for ``ppo_trainer``
    ``preset=NAME``: ``preset/NAME.yaml`` laid over the file before the key overrides), unresolved.
    Raises `verl.utils.typed_config.ConfigError` on a bad override."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import ConfigCompositionException

    from verl.utils.typed_config import ConfigError

    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return hydra_compose(config_name=config, overrides=list(overrides))
    except ConfigCompositionException as exc:
        raise ConfigError(f"bad override: {exc.__cause__ or exc}") from None


def add_yaml_argument(
    parser: argparse.ArgumentParser, flag: str, key: str, help: str = "", config: str = "ppo_trainer", **kwargs: Any
) -> None:
    """``parser.add_argument(flag, **kwargs)`` whose default is ``key``'s value in ``<config>.yaml``;
    the help text names that value and where it comes from."""
    value = yaml_value(config, key)
    source = f"default {value!r}: {config}.yaml {key}".replace("%", "%%")
    parser.add_argument(flag, default=value, help=f"{help} ({source})" if help else source, **kwargs)
