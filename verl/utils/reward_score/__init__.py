"""Reward modules: the one place a reward is written, whether it scores a single answer or a whole episode.

A reward module is a file in this folder with a function decorated by `register`::

    @register("short_answer", data_sources=("my_dataset",))
    def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float | dict: ...

Every module in this folder is imported with the package, so the decorator is the only
registration; a module outside it is named as ``algorithm.reward_score_fn=package.module:name``
and imported first (`load_reward_score`). A dict must hold ``"score"``; other keys are logged as
``reward/<name>/<key>/mean``.
``algorithm.reward_score_fn=<name>`` selects a function for every row; with ``null`` each row's
``data_source`` picks the function registered for it (`DATA_SOURCE_TO_FN`): a single-turn
dataset names its module with ``data_sources``, and each env's spec names its module
(``EnvSpec.reward_score``, by default ``episode``: the episode's composed reward, `episode.py`).

``solution_str`` is the decoded response (for an episode, the model's turns); ``ground_truth``
is the row's ``reward_model.ground_truth``; ``extra_info`` is the row's dataset ``extra_info``
plus what the rollout reported (for agent episodes: ``task_id``, ``env_reward``, ``success``,
``num_turns``, ``reward_breakdown``, ``reward_total``). `verl.trainer.ppo.reward` calls the
function and turns its score into token-level rewards (docs/architecture.md draws the path).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

from verl.utils.imports import import_registering_module

ScoreFn = Callable[..., Any]

SUPPORTED_REWARD_SCORE_FNS: dict[str, ScoreFn] = {}

DATA_SOURCE_TO_FN: dict[str, str] = {}


def register_reward_score(name: str, fn: ScoreFn | None = None, data_sources: tuple[str, ...] = ()) -> None:
    """Add ``fn`` under ``name`` (``None``: ``name`` is already registered),
    and make it the default for ``data_sources``."""
    if fn is None:
        if name not in SUPPORTED_REWARD_SCORE_FNS:
            raise ValueError(f"unknown reward score '{name}'; known: {sorted(SUPPORTED_REWARD_SCORE_FNS)}")
    elif name in SUPPORTED_REWARD_SCORE_FNS and SUPPORTED_REWARD_SCORE_FNS[name] is not fn:
        raise ValueError(f"reward score '{name}' is already registered")
    else:
        SUPPORTED_REWARD_SCORE_FNS[name] = fn
    for source in data_sources:
        DATA_SOURCE_TO_FN[source] = name


def register(name: str, data_sources: tuple[str, ...] = ()) -> Callable[[ScoreFn], ScoreFn]:
    """Decorator form of `register_reward_score`: ``@register("name")`` above a ``compute_score``."""

    def add(fn: ScoreFn) -> ScoreFn:
        register_reward_score(name, fn, data_sources)
        return fn

    return add


def load_reward_score(spec: str) -> str:
    """The registered name ``spec`` selects: a name itself, or ``package.module:name``, whose module is imported
    first (its ``@register(name)`` registers it), so a reward module may live in any file."""
    module, name = import_registering_module(spec, "reward module")
    if name not in SUPPORTED_REWARD_SCORE_FNS:
        where = f"{module} registers no reward named '{name}'" if module else f"unknown reward score '{name}'"
        raise ValueError(f"{where}; known: {sorted(SUPPORTED_REWARD_SCORE_FNS)}")
    return name


def get_reward_score_fn(name: str | None, data_source: str | None = None) -> tuple[str, ScoreFn]:
    """The function named ``name``, or the one registered for ``data_source`` when ``name`` is None."""
    if name is None:
        if data_source not in DATA_SOURCE_TO_FN:
            raise ValueError(
                f"no reward score registered for data_source '{data_source}'; set algorithm.reward_score_fn to one of "
                f"{sorted(SUPPORTED_REWARD_SCORE_FNS)} or register one for this source"
            )
        name = DATA_SOURCE_TO_FN[data_source]
    if name not in SUPPORTED_REWARD_SCORE_FNS:
        raise ValueError(f"unknown reward score '{name}'; known: {sorted(SUPPORTED_REWARD_SCORE_FNS)}")
    return name, SUPPORTED_REWARD_SCORE_FNS[name]


for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
