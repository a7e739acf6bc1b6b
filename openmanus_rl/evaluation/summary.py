"""The headline numbers of a set of rollouts: success and reward with 95% intervals, failures, invalid actions."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from openmanus_rl.evaluation.results import TaskResult, per_task
from openmanus_rl.evaluation.stats import REWARD_RESAMPLES, SUCCESS_RESAMPLES, Z95, bootstrap_ci, wilson_interval


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def _ci(values: Sequence[float], resamples: int, seed: int) -> list[float] | None:
    return list(bootstrap_ci(values, resamples=resamples, seed=seed)) if values else None


def summarize(results: Sequence[TaskResult], n: int, seed: int = 0) -> dict[str, Any]:
    """The headline numbers of ``results`` (``n`` rollouts per task); failed rollouts are counted, never scored.

    ``success_rate``: mean over scored tasks of each task's mean success, with ``success_ci95`` the
    Wilson interval when ``n == 1``, else a percentile bootstrap over per-task means
    (``SUCCESS_RESAMPLES``, ``seed``); ``mean_reward`` and ``reward_ci95`` likewise with a bootstrap
    (``REWARD_RESAMPLES``); ``invalid_action_rate`` per turn and ``mean_turns`` over unfailed
    rollouts; with ``n > 1`` also ``mean_at_k`` (= ``success_rate``) and ``pass_at_k``.
    """
    tasks = {r.task_id for r in results}
    scored = per_task(results)
    ok = [r for r in results if not r.failed]
    success = [float(np.mean([r.success for r in rows])) for rows in scored.values()]
    reward = [float(np.mean([r.env_reward for r in rows])) for rows in scored.values()]
    turns = sum(r.turns for r in ok)
    out: dict[str, Any] = {
        "tasks": len(tasks),
        "scored_tasks": len(scored),
        "rollouts": len(results),
        "failed": sum(r.failed for r in results),
        "success_rate": _mean(success),
    }
    if n == 1:
        out["success_ci95"] = list(wilson_interval(int(sum(success)), len(success)))
    else:
        out["success_ci95"] = _ci(success, SUCCESS_RESAMPLES, seed)
    out["mean_reward"] = _mean(reward)
    out["reward_ci95"] = _ci(reward, REWARD_RESAMPLES, seed)
    out["invalid_action_rate"] = sum(r.invalid_actions for r in ok) / turns if turns else 0.0
    out["mean_turns"] = _mean([float(r.turns) for r in ok])
    if n > 1:
        out["mean_at_k"] = out["success_rate"]
        out["pass_at_k"] = _mean([float(any(r.success for r in rows)) for rows in scored.values()])
    return out


def ci_methods(n: int, seed: int) -> dict[str, str]:
    """How `summarize` computed each interval, in words (the summary's ``ci_method``)."""
    success = (
        f"Wilson score interval over tasks (z={Z95})"
        if n == 1
        else f"percentile bootstrap over per-task mean success ({SUCCESS_RESAMPLES} resamples, seed {seed})"
    )
    return {
        "success": success,
        "reward": f"percentile bootstrap over per-task mean env reward ({REWARD_RESAMPLES} resamples, seed {seed})",
    }
