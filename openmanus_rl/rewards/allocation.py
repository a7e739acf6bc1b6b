"""Put each trajectory's scalar reward onto its tokens: ``token_level_scores`` ``(B, T)``.

Only model tokens (``response_mask`` 1) ever receive reward.  With ``R`` the
trajectory's reward, ``M`` its model tokens and ``e_0 < ... < e_{K-1}`` the
last model token of each of its ``K`` model turns:

* ``last_token``: ``s[e_{K-1}] = R``.
* ``uniform_positive``: if ``R > 0``, ``s[i] = R / M`` on every model token
  (the row sums to ``R``); otherwise ``s[e_{K-1}] = R``.
* ``discounted``: ``s[e_k] = gamma ** (K - 1 - k) * R`` (the last turn gets
  ``R``, each earlier turn one more factor ``gamma``).

A row without model tokens (e.g. a failed trajectory) stays all zero.
"""

from __future__ import annotations

import torch

STRATEGIES = ("last_token", "uniform_positive", "discounted")


def allocate(
    strategy: str,
    rewards: list[float],
    response_masks: list[list[int]],
    turn_ends: list[list[int]],
    width: int,
    gamma: float = 1.0,
) -> torch.Tensor:
    """``(B, width)`` float32 scores; ``turn_ends[b]`` lists each model turn's last model-token index."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown reward allocation {strategy!r}; choose one of {list(STRATEGIES)}")
    scores = torch.zeros((len(rewards), width), dtype=torch.float32)
    for b, (reward, mask, ends) in enumerate(zip(rewards, response_masks, turn_ends)):
        model = [i for i, m in enumerate(mask) if m]
        if not model:
            continue
        if strategy == "uniform_positive" and reward > 0:
            scores[b, model] = reward / len(model)
        elif strategy == "discounted":
            for k, end in enumerate(ends):
                scores[b, end] = gamma ** (len(ends) - 1 - k) * reward
        else:
            scores[b, model[-1]] = reward
    return scores
