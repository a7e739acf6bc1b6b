"""Gains that survive seeds: one baseline against N seeds of an RL arm on the same tasks, each seed paired with the
baseline (`compare`), and the gains pooled with an interval that resamples seeds and tasks both.

Per seed s and task t (the tasks the baseline and every seed scored): ``d[s, t] = success_s(t) - success_base(t)``.
The pooled gain is ``mean_{s,t} d[s, t]``.  Its interval (`pooled_bootstrap_ci`) is a two-level percentile bootstrap:
each resample draws S seeds and T tasks with replacement and takes the mean of ``d`` over the drawn seeds x tasks.
One task draw serves every seed of a resample because all seeds played the same tasks: a task that is easy for one
seed is easy for the others, and resampling tasks per seed on its own would treat those shared draws as independent
and narrow the interval.  With one seed it is the paired bootstrap over tasks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from openmanus_rl.evaluation.compare import compare, mean_per_task, success
from openmanus_rl.evaluation.results import load_task_results, per_task
from openmanus_rl.evaluation.stats import COMPARE_RESAMPLES


def pooled_bootstrap_ci(
    diffs: np.ndarray, resamples: int = COMPARE_RESAMPLES, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of ``mean(diffs)`` for ``diffs`` of shape (seeds, tasks), both resampled (module docstring).

    A resample's mean over drawn seeds x tasks is ``v . diffs . w`` with ``v_s`` (``w_t``) the share of the draws that
    picked seed s (task t): multinomial counts over S (T) equally likely cells divided by S (T), drawn with
    ``numpy.random.default_rng(seed)``.  A constant matrix gives ``[c, c]`` (to round-off).
    """
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 2 or 0 in d.shape:
        raise ValueError(f"diffs must be a non-empty (seeds, tasks) matrix, got shape {d.shape}")
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples >= 1 and 0 < level < 1, got {resamples}, {level}")
    n_seeds, n_tasks = d.shape
    rng = np.random.default_rng(seed)
    v = rng.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), size=resamples) / n_seeds
    w = rng.multinomial(n_tasks, np.full(n_tasks, 1 / n_tasks), size=resamples) / n_tasks
    stats = np.einsum("rs,st,rt->r", v, d, w)
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _success_by_task(path: str | os.PathLike[str]) -> dict[Any, float]:
    return mean_per_task(per_task(load_task_results(path)), success)


def seeds_report(
    base: str | os.PathLike[str],
    arms: Sequence[str | os.PathLike[str]],
    seed: int = 0,
    resamples: int = COMPARE_RESAMPLES,
) -> dict[str, Any]:
    """Each arm (one per seed) against ``base`` (`compare`: gain, paired interval, McNemar), then the pooled success
    gain over the tasks every file scored, with `pooled_bootstrap_ci`, and how many seeds lost significantly
    (their own interval entirely below 0)."""
    if not arms:
        raise ValueError("seeds_report needs at least one arm")
    per_seed = [compare(base, arm, seed=seed, resamples=resamples) for arm in arms]
    scores = [_success_by_task(base)] + [_success_by_task(arm) for arm in arms]
    shared = sorted(set.intersection(*(set(s) for s in scores)), key=str)
    out: dict[str, Any] = {
        "base": str(base),
        "arms": [str(a) for a in arms],
        "per_seed": per_seed,
        "shared_tasks": len(shared),
        "pooled": None,
    }
    if not shared:
        return out
    a = np.array([scores[0][t] for t in shared])
    diffs = np.array([[s[t] for t in shared] for s in scores[1:]]) - a
    below = sum(1 for c in per_seed if c["success"] is not None and c["success"]["ci95"][1] < 0)
    out["pooled"] = {
        "base_mean": float(a.mean()),
        "arm_mean": float((diffs + a).mean()),
        "gain": float(diffs.mean()),
        "ci95": list(pooled_bootstrap_ci(diffs, resamples=resamples, seed=seed)),
        "seeds": len(arms),
        "seeds_below_zero": below,
        "ci_method": f"percentile bootstrap over seeds and tasks ({resamples} resamples, seed {seed}; "
        "one task draw for every seed)",
    }
    return out
