"""Confidence intervals and the paired test: Wilson, percentile bootstrap (plain and paired), exact McNemar.

The bootstrap and the binomial test behind McNemar are scipy.stats'; the formulas they compute are written
beside them, and ``tests/openmanus_rl/test_eval.py`` checks them against hand computations.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
from scipy import stats as scipy_stats

Z95 = 1.959964
REWARD_RESAMPLES = 2000
SUCCESS_RESAMPLES = 2000
COMPARE_RESAMPLES = 10000


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``p = successes / n``.

    ``center = (p + z^2 / (2n)) / (1 + z^2 / n)``,
    ``half = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))``,
    interval ``[center - half, center + half]``; the bound is exactly 0 when ``successes = 0``
    and exactly 1 when ``successes = n`` (clipped to [0, 1] against rounding).
    ``z = 1.959964`` gives 95%.  With ``n = 0`` nothing is known: ``(0.0, 1.0)``.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo = 0.0 if successes == 0 else max(0.0, center - half)
    hi = 1.0 if successes == n else min(1.0, center + half)
    return lo, hi


def _as_vector(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of numbers, got shape {arr.shape}")
    return arr


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    stat: Callable[[np.ndarray], float] = np.mean,
    resamples: int = REWARD_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over ``values``.

    Draw ``resamples`` samples of size ``m = len(values)`` with replacement
    (``numpy.random.default_rng(seed)``), compute ``s_r = stat(sample_r)`` for each,
    and return the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the
    ``s_r`` (linear interpolation): ``scipy.stats.bootstrap(method="percentile")``.
    Deterministic for a given seed; a constant vector ``c`` gives ``[c, c]``.
    """
    x = _as_vector(values, "values")
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples >= 1 and 0 < level < 1, got {resamples}, {level}")
    if np.ptp(x) == 0:  # every resample is the data itself
        return float(stat(x)), float(stat(x))
    result = scipy_stats.bootstrap(
        (x,),
        stat,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        vectorized=False,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def paired_bootstrap_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    stat: Callable[[np.ndarray], float] = np.mean,
    resamples: int = COMPARE_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Paired percentile bootstrap interval of ``stat(b - a)``.

    ``a[i]`` and ``b[i]`` are the same task's scores under A and B; tasks (pairs)
    are resampled together, so the interval is `bootstrap_ci` of the per-task
    differences ``d_i = b_i - a_i``.  Identical vectors give ``[0, 0]``.
    """
    x, y = _as_vector(a, "a"), _as_vector(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired vectors differ in length: {x.size} and {y.size}")
    return bootstrap_ci(y - x, stat=stat, resamples=resamples, seed=seed, level=level)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar test on the discordant pairs.

    ``b``: pairs where A fails and B succeeds; ``c``: A succeeds and B fails.
    Under H0 (no difference) ``b ~ Binomial(b + c, 1/2)``, so
    ``p = min(1, 2 * sum_{i=0}^{min(b, c)} C(b + c, i) / 2^(b + c))``
    (scipy.stats.binomtest, two-sided, at 1/2).  ``b = c = 0`` gives 1.0.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    return float(min(1.0, scipy_stats.binomtest(b, b + c, 0.5).pvalue))
