"""The reward info WebShop reports for a purchase (`RewardBreakdown.as_dict`, a ``/step``'s ``info``), as the
reward tests expect it."""

from __future__ import annotations

from typing import Any


def full_marks(asin: str, price: float, price_upper: float, *, attrs: int, options: int) -> dict[str, Any]:
    """The info of buying the goal's own product ``asin`` at ``price`` (within ``price_upper``) with each of its
    ``attrs`` attributes and ``options`` options matched: the title, type, attribute, option and price scores all
    full, so the reward is 1.0."""
    return {
        "reward": 1.0,
        "r_type": 1.0,
        "r_att": 1.0,
        "r_option": 1.0,
        "r_price": True,
        "query_match": True,
        "category_match": True,
        "title_score": 1.0,
        "n_attr_matched": attrs,
        "n_attrs": attrs,
        "n_opt_matched": options,
        "n_opts": options,
        "price": price,
        "price_upper": price_upper,
        "asin": asin,
        "goal_asin": asin,
    }
