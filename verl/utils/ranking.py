"""How well scores rank outcomes: ROC AUC, and agreement on pairs within groups."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """``P(s_pos > s_neg) + 0.5 P(s_pos = s_neg)`` over every (positive, negative) pair (the Mann-Whitney
    form of the area under the ROC curve); None without both a positive and a negative."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return None
    above = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((above + 0.5 * ties) / (len(pos) * len(neg)))


def group_agreement(
    scores: Sequence[float], outcomes: Sequence[float], groups: Sequence[object]
) -> tuple[float | None, int]:
    """Among pairs of one group whose ``outcomes`` differ, the share the scores order the same way (a tie in
    score counts half), and how many such pairs there are (None when there are none)."""
    s = np.asarray(scores, dtype=np.float64)
    o = np.asarray(outcomes, dtype=np.float64)
    by_group: dict[object, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    agree, pairs = 0.0, 0
    for rows in by_group.values():
        for k, i in enumerate(rows):
            for j in rows[k + 1 :]:
                if o[i] == o[j]:
                    continue
                pairs += 1
                d = (s[i] - s[j]) * np.sign(o[i] - o[j])
                agree += 1.0 if d > 0 else 0.5 if d == 0 else 0.0
    return (agree / pairs if pairs else None), pairs
