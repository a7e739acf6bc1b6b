"""Literal family-A exchanges with a real WebShop server for session 0 of the generated catalogue."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
import requests

pytestmark = pytest.mark.slow

INSTR = ("i am after a box of protein bars that is non gmo and high protein, featuring whey protein with "
         "flavor: cinnamon roll, and size: 24 count, and price lower than 70.00 dollars")
START = f"WebShop [SEP] Instruction: [SEP] {INSTR} [SEP] Search"
HEAD = f"Instruction: [SEP] {INSTR} [SEP] Back to Search"
RESULTS = " [SEP] ".join([
    HEAD, "Page 1 (Total results: 50)", "Next >",
    "B0VTKLIE2F", "Bribly High Protein Snack Bars", "$38.95",
    "B095GVFLPW", "Bribly Keto Protein Bar Meal Replacement, Gluten Free Bars", "$24.97",
    "B0ZD0OI3E8", "Bribly Fair Trade Dark Chocolate Bar, Organic Bar", "$18.49 to $25.99",
    "B04L9EADG3", "Junana Protein Bars, Real Nuts Bar", "$24.99",
    "B0JG53Y8WK", "Pellstone High Protein Snack Bars Variety Pack, Non Gmo 20g Protein Bars", "$39.95",
    "B0NR4VNGF0", "Kaiora Protein Bars, Keto Friendly 20g Protein Bars", "$20.49",
    "B0P6ZZNO3K", "Norora Plant Based High Protein Snack Bars Meal Replacement, Keto Friendly 20g Protein Bars",
    "$17.99 to $26.99",
    "B0C9UTGW45", "Junstone High Protein Snack Bars, Plant Based Real Nuts Bar", "$19.97 to $27.99",
    "B05W26DGMK", "Pellco Low Sugar Keto Protein Bar, Whey Protein Bar", "$20.95",
    "B0QLJP4LXV", "Lumbly Keto Protein Bar Healthy Snack, High Protein Real Nuts Bar", "$29.99",
])
ITEM = " [SEP] ".join([
    HEAD, "< Prev", "flavor", "chocolate peanut butter", "salted caramel", "cinnamon roll", "size", "24 count",
    "Bribly High Protein Snack Bars", "Price: $38.95", "Rating: N.A.", "Description", "Features", "Reviews",
    "Buy Now",
])
FEATURES = " [SEP] ".join([
    HEAD, "< Prev",
    "HIGH PROTEIN: we tested every batch so the box of protein bars stays high protein over time.",
    "NON GMO: we tested every batch so the box of protein bars stays non gmo over time.",
    "Features whey protein - a small detail that makes this box of protein bars easier to live with.",
    "Package includes one box of protein bars and a quick start guide.",
])
END = "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 1.0"


@pytest.fixture(scope="module")
def fresh_server(start_server: Callable[..., Any]) -> Iterator[str]:
    """A server of its own, so env ids start at 0."""
    with start_server() as url:
        yield url


def exchange(url: str, method: str, path: str, body: Any = None, params: Any = None) -> Any:
    r = requests.request(method, url + path, json=body, params=params, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    return r.json()


def test_session_zero_end_to_end(fresh_server: str) -> None:
    u = fresh_server
    q = {"env_idx": 0}
    assert exchange(u, "GET", "/") == "ok"
    assert exchange(u, "POST", "/create") == 0
    assert exchange(u, "GET", "/list_envs") == [0]
    assert exchange(u, "POST", "/reset", {"env_idx": 0, "session_id": 0}) == [START, None]
    assert exchange(u, "GET", "/available_actions", params=q) == {"has_search_bar": True, "clickables": ["search"]}
    assert exchange(u, "GET", "/instruction_text", params=q) == INSTR
    assert exchange(u, "GET", "/observation", params=q) == START
    assert exchange(u, "GET", "/state", params=q)["url"] == "/0"

    step = {"env_idx": 0, "action": "search[Bribly protein bars]"}
    assert exchange(u, "POST", "/step", step) == {"state": RESULTS, "reward": 0.0, "done": False, "info": None}
    assert exchange(u, "GET", "/available_actions", params=q) == {"has_search_bar": False, "clickables": [
        "back to search", "next >", "b0vtklie2f", "b095gvflpw", "b0zd0oi3e8", "b04l9eadg3", "b0jg53y8wk",
        "b0nr4vngf0", "b0p6zzno3k", "b0c9utgw45", "b05w26dgmk", "b0qljp4lxv"]}

    for action, page in [("click[B0VTKLIE2F]", ITEM), ("click[salted caramel]", ITEM), ("click[features]", FEATURES),
                         ("click[< prev]", ITEM), ("click[cinnamon roll]", ITEM), ("click[24 count]", ITEM)]:
        got = exchange(u, "POST", "/step", {"env_idx": 0, "action": action})
        assert got == {"state": page, "reward": 0.0, "done": False, "info": None}, action
    assert exchange(u, "GET", "/available_actions", params=q) == {"has_search_bar": False, "clickables": [
        "back to search", "< prev", "description", "features", "reviews", "buy now",
        "chocolate peanut butter", "salted caramel", "cinnamon roll", "24 count"]}
    assert exchange(u, "GET", "/observation", params=q) == ITEM
    state = exchange(u, "GET", "/state", params=q)
    assert state["url"] == ("/item_page/0/B0VTKLIE2F/bribly%20protein%20bars/1/"
                            "%7B%22flavor%22%3A%20%22cinnamon%20roll%22%2C%20%22size%22%3A%20%2224%20count%22%7D")
    assert state["instruction_text"] == INSTR
    assert '<input type="radio" name="flavor" value="cinnamon roll" checked> cinnamon roll' in state["html"]

    # the second flavour click replaced the first: both goal options are selected, so 1.0
    assert exchange(u, "POST", "/step", {"env_idx": 0, "action": "click[Buy Now]"}) == {
        "state": END, "reward": 1.0, "done": True, "info": {
            "reward": 1.0, "r_type": 1.0, "r_att": 1.0, "r_option": 1.0, "r_price": True, "query_match": True,
            "category_match": True, "title_score": 1.0, "n_attr_matched": 3, "n_attrs": 3, "n_opt_matched": 2,
            "n_opts": 2, "price": 38.95, "price_upper": 70.0, "asin": "B0VTKLIE2F", "goal_asin": "B0VTKLIE2F"}}
    assert exchange(u, "GET", "/observation", params=q) == END
    assert exchange(u, "POST", "/close", {"env_idx": 0}) is True
    assert exchange(u, "GET", "/list_envs") == []
    # ids are never reused
    assert exchange(u, "POST", "/create") == 1
    assert exchange(u, "POST", "/create") == 2
    assert exchange(u, "GET", "/list_envs") == [1, 2]


def test_reset_without_session_id_picks_a_goal(fresh_server: str, shop: Any) -> None:
    env = exchange(fresh_server, "POST", "/create")
    for body in ({"env_idx": env}, {"env_idx": env, "session_id": None}):
        obs, extra = exchange(fresh_server, "POST", "/reset", body)
        instr = exchange(fresh_server, "GET", "/instruction_text", params={"env_idx": env})
        assert extra is None and obs == f"WebShop [SEP] Instruction: [SEP] {instr} [SEP] Search"
        assert instr in {g.instruction for g in shop.goals}
