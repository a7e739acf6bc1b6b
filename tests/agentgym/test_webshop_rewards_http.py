"""Purchases over HTTP, each reward worked out by hand from the generated catalogue."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from webshop_client import Client

pytestmark = pytest.mark.slow

# session 0: "... box of protein bars that is non gmo and high protein, featuring whey protein with flavor:
# cinnamon roll, and size: 24 count, and price lower than 70.00 dollars"; target B0VTKLIE2F ($38.95),
# "Bribly High Protein Snack Bars" (title nouns {protein, snack, bars}: "bribly" ends in -ly).
# session 2: "... airline approved portable charger that has usb c input ... with color: pink, and size:
# 5000mah, and price lower than 50.00 dollars"; target title "Tamana Lightweight Battery Pack, Airline
# Approved Bank" (title nouns {tamana, battery, pack, airline, bank}).


@pytest.fixture()
def client(server: str) -> Iterator[Client]:
    c = Client(server)
    yield c
    c.close()


def buy(client: Client, session_id: int, query: str, asin: str, options: list[str]) -> dict[str, Any]:
    """Reset, search, page to ``asin``, select ``options``, buy; every step before the buy pays 0."""
    client.reset(session_id)
    steps = [client.step(f"search[{query}]")]
    while asin.lower() not in client.clickables():
        assert "next >" in client.clickables(), f"{asin} not in the results for {query!r}"
        steps.append(client.step("click[next >]"))
    steps.append(client.step(f"click[{asin}]"))
    steps += [client.step(f"click[{o}]") for o in options]
    steps += [client.step("click[description]"), client.step("click[< prev]")]
    assert all((s["reward"], s["done"], s["info"]) == (0.0, False, None) for s in steps)
    final = client.step("click[buy now]")
    assert final["done"] is True and final["reward"] == final["info"]["reward"]
    assert final["state"].startswith("Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] ")
    return final


def test_perfect_purchase(client: Client) -> None:
    # 3 attributes + 2 options + price: (3 + 2 + 1) / (3 + 2 + 1) = 1.0
    r = buy(client, 0, "protein bars whey", "B0VTKLIE2F", ["cinnamon roll", "24 count"])
    assert r["reward"] == 1.0


def test_wrong_flavour(client: Client) -> None:
    # "salted caramel" instead of "cinnamon roll": (3 + 1 + 1) / 6 = 0.8333
    r = buy(client, 0, "protein bars whey", "B0VTKLIE2F", ["salted caramel", "24 count"])
    assert r["reward"] == pytest.approx(5 / 6)
    assert (r["info"]["n_opt_matched"], r["info"]["r_option"]) == (1, 0.5)


def test_no_options_selected(client: Client) -> None:
    # (3 + 0 + 1) / 6 = 0.6667
    assert buy(client, 0, "protein bars whey", "B0VTKLIE2F", [])["reward"] == pytest.approx(4 / 6)


def test_over_budget(client: Client) -> None:
    # B07MPNK5GZ "Darstone Battery Pack Compact" $58.99 > 50: same query (power bank), attributes
    # "usb c input" and "airline approved" both listed, both options offered; title nouns {darstone,
    # battery, pack} share 2 of 5 -> r_type 1.  (2 + 2 + 0) / (2 + 2 + 1) = 0.8
    r = buy(client, 2, "Darstone Battery Pack Compact", "B07MPNK5GZ", ["pink", "5000mah"])
    assert r["reward"] == pytest.approx(0.8)
    assert (r["info"]["r_price"], r["info"]["price"], r["info"]["price_upper"]) == (False, 58.99, 50.0)


def test_other_type_with_a_shared_noun_halves(client: Client) -> None:
    # B0RFDBB3ZR protein bars for the power-bank goal: only "pack" is shared, 1/5 = 0.2 (not > 0.2), no
    # query or category match -> r_type 0.5; no attributes, no options, price 27.97 <= 50:
    # 0.5 * (0 + 0 + 1) / 5 = 0.1
    r = buy(client, 2, "Pellella Low Sugar High Protein Snack Bars Variety Pack", "B0RFDBB3ZR", [])
    assert r["reward"] == pytest.approx(0.1)
    assert (r["info"]["r_type"], r["info"]["title_score"]) == (0.5, pytest.approx(0.2))


def test_other_type_without_shared_noun_scores_zero(client: Client) -> None:
    # B0ZD0OI3E8 "Bribly Fair Trade Dark Chocolate Bar, Organic Bar": nouns {fair, trade, bar} ("chocolate"
    # is a colour word, "dark" an adjective) share nothing with {protein, snack, bars} -> r_type 0 -> 0.0
    r = buy(client, 0, "Bribly Fair Trade Dark Chocolate Bar", "B0ZD0OI3E8", [])
    assert (r["reward"], r["info"]["r_type"]) == (0.0, 0.0)


def test_rewards_stay_in_unit_interval(client: Client, shop: Any) -> None:
    for session_id in range(10, 20):
        target = shop.by_asin[shop.goal(session_id).asin]
        client.reset(session_id)
        client.step(f"search[{target.query}]")
        first = client.clickables()[2]
        client.step(f"click[{first}]")
        r = client.step("click[buy now]")
        assert 0.0 <= r["reward"] <= 1.0 and r["done"]
