"""Reward-score registry: one ``compute_score`` per reward module, selected by name or by data source.

A reward module is a file in this folder with::

    def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float | dict

(a dict must hold ``"score"``; other keys are logged as ``reward/<name>/<key>/mean``).
Register it in `SUPPORTED_REWARD_SCORE_FNS` (or call `register_reward_score`) and
select it with ``algorithm.reward_score_fn=<name>``; with ``null`` the trainer
picks the function registered for each row's ``data_source``
(`DATA_SOURCE_TO_FN`). The engine knows no env: rollouts register theirs (the
agent maps every env it defines to its ``agentgym`` episode reward).

``extra_info`` carries what the rollout reported (for agent episodes: ``task_id``,
``env_reward``, ``success``, ``num_turns``, ``reward_breakdown``, ``reward_total``)
and the row's dataset ``extra_info``.
"""

from __future__ import annotations

from typing import Any, Callable

from verl.utils.reward_score import countdown, exact_match

ScoreFn = Callable[..., Any]

SUPPORTED_REWARD_SCORE_FNS: dict[str, ScoreFn] = {"exact_match": exact_match.compute_score}

DATA_SOURCE_TO_FN: dict[str, str] = {}


def register_reward_score(name: str, fn: ScoreFn | None = None, data_sources: tuple[str, ...] = ()) -> None:
    """Add ``fn`` under ``name`` (``None``: ``name`` is already registered), and make it the default for ``data_sources``."""
    if fn is None:
        if name not in SUPPORTED_REWARD_SCORE_FNS:
            raise ValueError(f"unknown reward score '{name}'; known: {sorted(SUPPORTED_REWARD_SCORE_FNS)}")
    elif name in SUPPORTED_REWARD_SCORE_FNS and SUPPORTED_REWARD_SCORE_FNS[name] is not fn:
        raise ValueError(f"reward score '{name}' is already registered")
    else:
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
