"""WebShop reward, computed by hand on a small hand-made product and goal."""

from __future__ import annotations

import dataclasses

import pytest
from webshop_rewards import full_marks

from agentgym.webshop.data import Goal, Product
from agentgym.webshop.reward import (
    compute_reward,
    normalize_color,
    options_match,
    title_nouns,
    type_reward,
)

HAIR_PATH = "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Hair Extensions"

TARGET = Product(
    asin="B0TARGET01",
    title="Velmora Heat Resistant Clip in Hair Extensions for Women",
    brand="Velmora",
    category="beauty",
    query="hair extensions",
    product_category=HAIR_PATH,
    price=25.99,
    price_text="$25.99",
    bullets=("TANGLE FREE: brushes out easily after washing.",),
    description="Adds volume in minutes.",
    attributes=("natural looking", "heat resistant", "human hair"),
    options={"color": ("natural black", "ash blonde"), "size": ("14 inch", "22 inch")},
)

GOAL = Goal(
    session_id=0,
    asin="B0TARGET01",
    instruction="i need natural looking hair extensions ...",
    attributes=("natural looking", "tangle free"),
    options=("natural black", "22 inch"),
    price_upper=40.0,
    query="hair extensions",
    category="beauty",
    product_category=HAIR_PATH,
    name=TARGET.title,
)

PERFECT = {"color": "natural black", "size": "22 inch"}


def other(title: str, query: str, path: str, **kw: object) -> Product:
    return dataclasses.replace(
        TARGET,
        asin="B0OTHER001",
        title=title,
        query=query,
        product_category=path,
        attributes=(),
        bullets=(),
        description="",
        **kw,
    )


def test_perfect_purchase_scores_one() -> None:
    # "natural looking" matches an attribute (ratio 100); "tangle free" is a substring of the bullets.
    # (2 attrs + 2 options + 1 price) / (2 + 2 + 1) = 1.0, r_type 1.0
    r = compute_reward(TARGET, GOAL, PERFECT)
    assert r.as_dict() == full_marks("B0TARGET01", 25.99, 40.0, attrs=2, options=2)


def test_wrong_option_costs_one_fifth() -> None:
    # "14 inch" vs "22 inch": token-set ratio max(ratio("inch", "inch 14"), ratio("inch 14", "inch 22"))
    # = max(2*4/11, 2*5/14) = 72.7 <= 85, no match.  (2 + 1 + 1) / 5 = 0.8
    r = compute_reward(TARGET, GOAL, {"color": "natural black", "size": "14 inch"})
    assert (r.reward, r.n_opt_matched, r.r_option) == (pytest.approx(0.8), 1, 0.5)


def test_no_option_selected() -> None:
    # (2 + 0 + 1) / 5 = 0.6
    r = compute_reward(TARGET, GOAL, {})
    assert (r.reward, r.r_option) == (pytest.approx(0.6), 0.0)


def test_over_budget_costs_one_fifth() -> None:
    # price 25.99 > 20: (2 + 2 + 0) / 5 = 0.8
    r = compute_reward(TARGET, dataclasses.replace(GOAL, price_upper=20.0), PERFECT)
    assert (r.reward, r.r_price) == (pytest.approx(0.8), False)


def test_price_equal_to_limit_passes() -> None:
    r = compute_reward(TARGET, dataclasses.replace(GOAL, price_upper=25.99), PERFECT)
    assert (r.reward, r.r_price) == (1.0, True)


def test_missing_attribute_costs_one_fifth() -> None:
    # "tangle free" no longer in the bullets, nor in title, description or attributes: (1 + 2 + 1) / 5 = 0.8
    product = dataclasses.replace(TARGET, bullets=("Brushes out easily.",))
    r = compute_reward(product, GOAL, PERFECT)
    assert (r.reward, r.n_attr_matched, r.r_att) == (pytest.approx(0.8), 1, 0.5)


def test_same_category_other_type_keeps_full_type_credit() -> None:
    # nouns(goal) = {velmora, heat, clip, hair, extensions, women}; nouns(shampoo) = {lumora, sulfate,
    # shampoo, hair}: title_score 1/6 = 0.167 (>= 0.1); paths share "Beauty & Personal Care" and
    # "Hair Care" -> category match -> r_type 1.0.  No attributes, no options: (0 + 0 + 1) / 5 = 0.2
    shampoo = other(
        "Lumora Sulfate Free Shampoo for Dry Hair",
        "shampoo",
        "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
    )
    r = compute_reward(shampoo, GOAL, {})
    assert (r.r_type, r.category_match, r.query_match) == (1.0, True, False)
    assert r.title_score == pytest.approx(1 / 6)
    assert r.reward == pytest.approx(0.2)


def test_other_category_small_title_overlap_halves() -> None:
    # nouns(earbuds) = {korrix, earbuds, women}: overlap {women} -> 1/6 = 0.167, not > 0.2, no query
    # or category match -> r_type 0.5.  0.5 * (0 + 0 + 1) / 5 = 0.1
    earbuds = other(
        "Korrix Wireless Earbuds for Women",
        "wireless earbuds",
        "Electronics › Headphones, Earbuds & Accessories › Earbud Headphones",
    )
    r = compute_reward(earbuds, GOAL, {})
    assert (r.r_type, r.reward) == (0.5, pytest.approx(0.1))


def test_no_title_overlap_scores_zero_even_with_query_match() -> None:
    # nouns(earbuds) = {korrix, earbuds}: overlap 0 -> r_type 0, whatever the query says.
    earbuds = other("Korrix Wireless Earbuds", "hair extensions", "Electronics › Earbud Headphones")
    kind = type_reward(earbuds, GOAL)
    assert kind == {"r_type": 0.0, "query_match": True, "category_match": False, "title_score": 0.0}
    assert compute_reward(earbuds, GOAL, PERFECT).reward == 0.0


def test_tiny_title_overlap_gives_one_tenth() -> None:
    # 11 goal nouns, 1 shared: 1/11 = 0.091 < 0.1 -> r_type 0.1
    goal = dataclasses.replace(
        GOAL,
        name="alpha beta gamma delta epsilon zeta theta iota kappa lambda sigma",
        query="greek letters",
        product_category="Letters › Greek",
    )
    product = other("sigma", "latin letters", "Letters › Latin")
    kind = type_reward(product, goal)
    assert kind["r_type"] == 0.1
    assert kind["title_score"] == pytest.approx(1 / 11)


def test_goal_title_without_nouns_counts_as_point_two() -> None:
    # no goal nouns -> title_score 0.2 (not > 0.2), no query / category match -> 0.5
    goal = dataclasses.replace(GOAL, name="Soft and Warm", query="q1", product_category="A › B")
    product = other("Soft Blanket", "q2", "C › D")
    assert type_reward(product, goal) == {
        "r_type": 0.5,
        "query_match": False,
        "category_match": False,
        "title_score": 0.2,
    }


def test_goal_without_options_has_no_option_score() -> None:
    # (2 + 0 + 1) / (2 + 0 + 1) = 1.0
    r = compute_reward(TARGET, dataclasses.replace(GOAL, options=()), {"color": "ash blonde"})
    assert (r.reward, r.r_option, r.n_opts) == (1.0, None, 0)


def test_colour_normalisation() -> None:
    assert normalize_color("dark brown") == "brown"
    assert normalize_color("Navy Blue") == "blue"
    assert normalize_color("22 inch") == "22 inch"
    assert options_match("jet black", "natural black")
    assert not options_match("natural black", "ash blonde")
    assert options_match("Small", "small")
    assert not options_match("medium", "large")


def test_title_nouns() -> None:
    assert title_nouns("Velmora Heat Resistant Clip in Hair Extensions for Women") == {
        "velmora",
        "heat",
        "clip",
        "hair",
        "extensions",
        "women",
    }
    # adjectives, colours, -ly/-ing/-ed words go; -ing nouns from the keep list stay
    assert title_nouns("Really Cushioned Running Shoes, Black Lightweight Clothing") == {"shoes", "clothing"}
