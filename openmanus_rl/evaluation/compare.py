"""Paired comparison of two evaluation results over the tasks both scored: bootstrap interval of the gain, McNemar."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from openmanus_rl.evaluation.results import TaskResult, load_task_results, per_task, read_summary
from openmanus_rl.evaluation.stats import COMPARE_RESAMPLES, mcnemar_exact, paired_bootstrap_ci


def _task_file_sha256(path: str | os.PathLike[str]) -> str | None:
    return ((read_summary(path) or {}).get("provenance") or {}).get("task_file_sha256")


def provenance_warnings(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> list[str]:
    """Why the pairing may be unsound: one line when both summaries record a ``task_file_sha256`` and they differ
    (results without a summary or a ``provenance`` give none)."""
    ha, hb = _task_file_sha256(a), _task_file_sha256(b)
    if ha is None or hb is None or ha == hb:
        return []
    return [
        f"A and B read different task files (sha256 {ha[:12]}... and {hb[:12]}...): "
        "the same task id may be a different task"
    ]


def success(r: TaskResult) -> float:
    return float(r.success)


def env_reward(r: TaskResult) -> float:
    return r.env_reward


def mean_per_task(by_task: Mapping[Any, list[TaskResult]], value: Callable[[TaskResult], float]) -> dict[Any, float]:
    """Each task's mean of ``value`` over its scored rollouts (`per_task`)."""
    return {t: float(np.mean([value(r) for r in rows])) for t, rows in by_task.items()}


def compare(
    a: str | os.PathLike[str], b: str | os.PathLike[str], seed: int = 0, resamples: int = COMPARE_RESAMPLES
) -> dict[str, Any]:
    """Paired comparison of result B against result A over the tasks both scored.

    Per task: success = mean success over its non-failed rollouts (0/1 when greedy),
    reward = mean env reward.  Reports mean(B) - mean(A) (``gain``) with a
    `paired_bootstrap_ci`; with one rollout per task in both, also the discordant
    counts ``b`` (A fails, B succeeds), ``c`` (A succeeds, B fails) and
    `mcnemar_exact` (b, c).  ``warnings``: `provenance_warnings`.
    """
    ra, rb = load_task_results(a), load_task_results(b)
    ta, tb = per_task(ra), per_task(rb)
    ids_a, ids_b = {r.task_id for r in ra}, {r.task_id for r in rb}
    shared = [t for t in ta if t in tb]
    both_ids = ids_a & ids_b
    out: dict[str, Any] = {
        "a": str(a),
        "b": str(b),
        "shared_tasks": len(shared),
        "only_a": len(ids_a - ids_b),
        "only_b": len(ids_b - ids_a),
        "unscored_shared": len(both_ids) - len(shared),  # in both files, but all rollouts failed in at least one
        "ci_method": f"paired percentile bootstrap over tasks ({resamples} resamples, seed {seed})",
        "warnings": provenance_warnings(a, b),
    }
    if not shared:
        out["success"] = out["reward"] = None
        return out
    for key, value in (("success", success), ("reward", env_reward)):
        ma, mb = mean_per_task(ta, value), mean_per_task(tb, value)
        va, vb = np.array([ma[t] for t in shared]), np.array([mb[t] for t in shared])
        out[key] = {
            "a_mean": float(va.mean()),
            "b_mean": float(vb.mean()),
            "gain": float((vb - va).mean()),
            "ci95": list(paired_bootstrap_ci(va, vb, resamples=resamples, seed=seed)),
        }
    binary = all(len(ta[t]) == 1 and len(tb[t]) == 1 for t in shared)
    out["binary"] = binary
    if binary:
        sa = [ta[t][0].success for t in shared]
        sb = [tb[t][0].success for t in shared]
        b_wins = sum(1 for x, y in zip(sa, sb) if not x and y)
        a_wins = sum(1 for x, y in zip(sa, sb) if x and not y)
        out["success"].update(b=b_wins, c=a_wins, mcnemar_p=mcnemar_exact(b_wins, a_wins))
    return out
