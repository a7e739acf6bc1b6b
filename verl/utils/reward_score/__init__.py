"""Reward-score registry: one ``compute_score`` per reward module, selected by name or by data source.

A reward module is a file in this folder with::

    def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float | dict

(a dict must hold ``"score"``; other keys are logged as ``reward/<name>/<key>/mean``).
Register it in `SUPPORTED_REWARD_SCORE_FNS` (or call `register_reward_score`) and
select it with ``algorithm.reward_score_fn=<name>``; with ``null`` the trainer
picks the function registered for each row's ``data_source``
(`DATA_SOURCE_TO_FN`), which for AgentGym environments is ``agentgym``.

``extra_info`` carries the trajectory: ``task_id``, ``env_reward``, ``success``,
``num_turns``, ``reward_breakdown``, ``reward_total`` (the agent's composed
reward) and the row's dataset ``extra_info``.
"""

from __future__ import annotations

from typing import Any, Callable

from verl.utils.reward_score import agentgym, countdown, exact_match

ScoreFn = Callable[..., Any]

SUPPORTED_REWARD_SCORE_FNS: dict[str, ScoreFn] = {
    "agentgym": agentgym.compute_score,
    "exact_match": exact_match.compute_score,
}

DATA_SOURCE_TO_FN: dict[str, str] = {
    name: "agentgym"
    for name in ("webshop", "babyai", "textcraft", "sciworld", "alfworld", "maze", "wordle", "sqlgym", "frozenlake", "sokoban")
}


def register_reward_score(name: str, fn: ScoreFn, data_sources: tuple[str, ...] = ()) -> None:
    """Add ``fn`` under ``name`` (and make it the default for ``data_sources``)."""
    if name in SUPPORTED_REWARD_SCORE_FNS and SUPPORTED_REWARD_SCORE_FNS[name] is not fn:
        raise ValueError(f"reward score '{name}' is already registered")
    SUPPORTED_REWARD_SCORE_FNS[name] = fn
    for source in data_sources:
        DATA_SOURCE_TO_FN[source] = name


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


register_reward_score("countdown", countdown.compute_score, data_sources=("countdown",))
