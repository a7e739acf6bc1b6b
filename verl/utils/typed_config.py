"""Typed configs built from plain dicts (or Hydra/OmegaConf) with strict checking: the machinery every config
dataclass of the project uses, at the bottom of `verl` so that any layer may use it.

`from_dict(Cls, data, where)` fills a dataclass recursively and raises
`ConfigError` for an unknown key (listing the known ones) or a value of the
wrong type, naming the full dotted path (e.g. ``actor_rollout_ref.actor.lr``).
A class may also take sections it does not list as fields, typed by what a
registry says (``algorithm.<estimator>``): its ``section_type(key)`` names the
dataclass of section ``key`` (None: an unknown key), and the built sections are
the instance's ``sections`` (a dict by key).
A field made with `handed` is no config key: the code that builds the object hands its value in
(``AgentConfig.sampling``, the rollout engine's, handed to the agent by its plugin).
`require` and `require_counts` state the bounds a type cannot (``lr`` above 0, a batch size at least 1) with
one message shape. `defaults_from(config, section)` gives a config dataclass its default values
from the trainer YAML, the only place they are written; `load_yaml_config`
loads a whole YAML file with overrides into its dataclass.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from dataclasses import field
from typing import Any, Callable, Sequence, TypeVar

from verl.utils.yaml_defaults import compose, yaml_value

T = TypeVar("T")


class ConfigError(ValueError):
    """A config value is unknown, missing or of the wrong type."""


HANDED = "handed"  # field metadata: the value is handed in by the builder, never read from a config


def handed(**kwargs: Any) -> Any:
    """A dataclass field that is no config key (``kwargs`` go to `dataclasses.field`, e.g. ``default=None``):
    `defaults_from` matches the YAML section without it, and `from_dict` refuses it as an unknown key and leaves
    it at its default; the code that builds the object hands the value in."""
    return field(metadata={HANDED: True}, **kwargs)


def config_fields(cls: Any) -> list[dataclasses.Field]:
    """The fields of dataclass ``cls`` (or an instance) that are config keys: all but the `handed` ones."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get(HANDED)]


def require(ok: bool, where: str, rule: str, value: Any) -> None:
    """A bound a type cannot express: unless ``ok``, ``ConfigError("<where> must be <rule>, got <value>")``."""
    if not ok:
        raise ConfigError(f"{where} must be {rule}, got {value}")


def require_counts(section: Any, names: Sequence[str], where: str) -> None:
    """Each named field of ``section`` (a count or a size) is at least 1: `require` on ``<where>.<name>``."""
    for name in names:
        require(getattr(section, name) >= 1, f"{where}.{name}", ">= 1", getattr(section, name))


def _check_type(value: Any, tp: Any, where: str, validate: bool = True) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg, where, validate)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: expected {tp}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where, validate)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [_check_type(v, item_tp, f"{where}[{i}]", validate) for i, v in enumerate(value)]
        return list(items) if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{where}: expected {tp.__name__}, got a bool ({value!r})")
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} ({value!r})")
    return value


def from_dict(cls: type[T], data: Any, where: str = "config", validate: bool = True) -> T:
    """Build dataclass ``cls`` from ``data`` (a dict, an OmegaConf node, or an instance of ``cls``); with
    ``validate``, each object built runs its ``validate(where)`` method, if it has one."""
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if hasattr(data, "items") and not isinstance(data, dict):  # OmegaConf DictConfig
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(data, resolve=True)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in config_fields(cls)}
    sections = {key: _section_type(cls, key) for key in set(data) - set(fields)}
    unknown = sorted(key for key, tp in sections.items() if tp is None)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            given = _over_default(f, data[name])
            kwargs[name] = _check_type(given, hints[name], f"{where}.{name}", validate)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{name} is required")
    obj = cls(**kwargs)
    if sections:
        obj.sections = {key: from_dict(tp, data[key], f"{where}.{key}", validate) for key, tp in sections.items()}
    check = getattr(obj, "validate", None)
    if validate and callable(check):
        check(where)
    return obj


def _over_default(f: dataclasses.Field, given: Any) -> Any:
    """``given`` for field ``f``; a mapping given where the default is a dataclass keeps that default's values for
    the keys it leaves out (recursively). So a section's defaults are the YAML's for that place: the critic's
    ``optim`` section built from ``{"total_training_steps": 3}`` runs at the lr ``critic.optim`` says, not at the
    ``OptimConfig`` defaults (the policy's)."""
    if not isinstance(given, dict):
        return given
    return _overlay(f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default, given)


def _overlay(base: Any, given: Any) -> Any:
    if not (dataclasses.is_dataclass(base) and not isinstance(base, type) and isinstance(given, dict)):
        return given
    merged: dict[str, Any] = {f.name: getattr(base, f.name) for f in config_fields(base)}
    for key, value in given.items():
        merged[key] = _overlay(merged.get(key), value)
    return merged


def _section_type(cls: type, key: str) -> type | None:
    """The dataclass of ``cls``'s extra section ``key`` (its ``section_type``), or None."""
    section_type = getattr(cls, "section_type", None)
    return section_type(key) if section_type is not None else None


def defaults_from(config: str, section: str = "") -> Callable[[type[T]], type[T]]:
    """Class decorator, placed under ``@dataclass``: each field's default is its key's value in ``section``
    (dotted; ``""``: the whole file) of ``<config>.yaml``, type-checked as `from_dict` does.

    The section's keys and the class's fields (inherited ones included, `handed` ones not) must be the same set,
    and the class may write no default of its own but a `handed` field's; either fault raises `ConfigError` when
    the class is defined. A nested dataclass default is built from its sub-section without running ``validate``
    (an empty model path may stand as a default); mutable defaults are copied for each instance. The class
    records ``_yaml_source = (config, section)``.
    """
    source = f"{config}.yaml {section or '(top level)'}"

    def fill(cls: type[T]) -> type[T]:
        values = yaml_value(config, section)
        hints = {name: tp for name, tp in typing.get_type_hints(cls).items() if not _is_handed(cls, name)}
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        _check_fields(cls, hints, values, source)
        for name, tp in hints.items():
            annotations.setdefault(name, tp)
            key = f"{section}.{name}" if section else name
            setattr(cls, name, _default(_check_type(values[name], tp, f"{config}.yaml {key}", validate=False)))
        cls.__annotations__ = annotations
        cls._yaml_source = (config, section)
        return cls

    return fill


def _check_fields(cls: type, hints: dict[str, Any], values: dict[str, Any], source: str) -> None:
    """`ConfigError` when ``cls`` writes a default of its own, or its fields and the YAML ``values`` differ as sets."""
    written = sorted(name for name in cls.__dict__.get("__annotations__", {}) if name in cls.__dict__ and name in hints)
    if written:
        raise ConfigError(f"{cls.__name__} writes its own default for {written}: defaults live in {source}")
    keys = {key for key in values if key in hints or _section_type(cls, key) is None}
    if keys != set(hints):
        raise ConfigError(
            f"{cls.__name__} and {source} disagree: fields only in the class "
            f"{sorted(set(hints) - keys)}, keys only in the YAML {sorted(keys - set(hints))}"
        )


def _is_handed(cls: type, name: str) -> bool:
    """Whether ``cls`` (not yet a dataclass) declares field ``name`` with `handed`."""
    declared = cls.__dict__.get(name)
    return isinstance(declared, dataclasses.Field) and bool(declared.metadata.get(HANDED))


def _default(value: Any) -> Any:
    """A dataclass default: the value itself, or a factory of copies for a mutable one."""
    if isinstance(value, (list, dict)) or dataclasses.is_dataclass(value):
        return field(default_factory=functools.partial(copy.deepcopy, value))
    return value


def load_yaml_config(cls: type[T], config: str, overrides: Sequence[str] = (), where: str = "config") -> T:
    """``<config>.yaml`` with Hydra-syntax overrides, interpolations resolved, built into ``cls`` by `from_dict`
    (its checks included); raises `ConfigError` on the first problem."""
    from omegaconf import OmegaConf

    raw = compose(config, overrides)
    try:
        container = OmegaConf.to_container(raw, resolve=True)
    except Exception as exc:  # interpolation errors name the key
        raise ConfigError(f"config interpolation failed: {exc}") from None
    return from_dict(cls, container, where)
