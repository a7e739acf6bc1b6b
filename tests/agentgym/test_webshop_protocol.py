"""Literal family-A exchanges with a real WebShop server for session 209 of the generated catalogue (a goal with
two options, one of them a two-colour value, on a product whose price is a range)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
import requests
from webshop_rewards import full_marks

pytestmark = pytest.mark.slow

INSTR = (
    "help me find a phone case that's shockproof with raised edges with color: wine red | sky blue, and "
    "size: pixel 8, and price lower than 40.00 dollars"
)
START = f"WebShop [SEP] Instruction: [SEP] {INSTR} [SEP] Search"
HEAD = f"Instruction: [SEP] {INSTR} [SEP] Back to Search"
RESULTS = " [SEP] ".join(
    [
        HEAD,
        "Page 1 (Total results: 50)",
        "Next >",
        "B0X7ANODZG",
        "Zelorra Scratch Resistant Slim Protective Case with Screen Protector",
        "$7.00 to $16.99",
        "B0SQWVBJO1",
        "Ulwick Shockproof Phone Case Military Grade - Upgraded 2023 Version Raised Edges, Portable, for My New Phone",
        "$8.89",
        "B07WDUJFTS",
        "Kaitex Anti Yellowing Phone Case, Slim, for My New Phone, Universal Fit, "
        "Compatible with iPhone Samsung Android, Portable Easy Setup - Kickstand, for Home Office",
        "$21.97",
        "B0U7R5CUE8",
        "Verora Phone Case Protective Cover Easy Setup, for My New Phone, "
        "Universal Fit - Kickstand, for Travel, Plug and Play",
        "$9.89",
        "B092NQMYJA",
        "Kaiwick Slim Phone Case Military Grade with USB C Cable - Scratch Resistant",
        "$9.97",
        "B0759X0DV9",
        "Vertex Slim Protective Case Drop Protection - Compatible with iPhone Samsung Android, for My New Phone, "
        "Magnetic Ring, Upgraded 2023 Version, for Travel - Card Holder Portable - Plug and Play",
        "$17.49",
        "B0II6CB9UT",
        "Marfield Anti Yellowing Phone Case, for Travel Upgraded 2023 Version, Portable Magnetic Ring - Card Holder - "
        "Compatible with iPhone Samsung Android - Slim, Drop Protection - Universal Fit",
        "$11.00",
        "B0RYXE0XRS",
        "Slim Protective Case for Travel - Drop Protection, Plug and Play, with USB C Cable, for My New Phone, "
        "Scratch Resistant, Easy Setup, Kickstand",
        "$16.89",
        "B0PKHJ4OMR",
        "Darwick Scratch Resistant Slim Protective Case Protective Cover",
        "$9.00 to $15.99",
        "B0IJZCXZ9Y",
        "Scratch Resistant Phone Case with Screen Protector, Portable",
        "$22.99",
    ]
)
TITLE = "Zelorra Scratch Resistant Slim Protective Case with Screen Protector"
ITEM = " [SEP] ".join(
    [
        HEAD,
        "< Prev",
        "color",
        "clear",
        "matte black",
        "lavender purple",
        "wine red | sky blue",
        "b-mint green",
        "size",
        "iphone 15",
        "galaxy s24",
        "pixel 8",
        TITLE,
        "Price: $7.00 to $16.99",
        "Rating: N.A.",
        "Description",
        "Features",
        "Reviews",
        "Buy Now",
    ]
)
FEATURES = " [SEP] ".join(
    [
        HEAD,
        "< Prev",
        "RAISED EDGES DESIGN - Thanks to raised edges, the phone case is a practical choice for your home, "
        "your office or your next trip.",
        "SHOCKPROOF YOU CAN TRUST - Our team tested the phone case again and again to make sure it stays "
        "shockproof, day after day.",
        "WHY CARD HOLDER MATTERS - Thanks to card holder, the phone case is a practical choice for your home, "
        "your office or your next trip.",
        "PREMIUM SCRATCH RESISTANT - Being scratch resistant means less to worry about: "
        "the phone case looks and works the same after months of use.",
        "SLIM YOU CAN TRUST - Being slim means less to worry about: the phone case looks and works the same after "
        "months of use. If you have any question, contact us and we will reply within 24 hours.",
        "Package includes one phone case and a quick start guide. Satisfaction guaranteed: "
        "return or exchange within 30 days, no questions asked.",
    ]
)
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


def test_session_209_end_to_end(fresh_server: str) -> None:
    u = fresh_server
    q = {"env_idx": 0}
    assert exchange(u, "GET", "/") == "ok"
    assert exchange(u, "POST", "/create") == 0
    assert exchange(u, "GET", "/list_envs") == [0]
    assert exchange(u, "POST", "/reset", {"env_idx": 0, "session_id": 209}) == [START, None]
    assert exchange(u, "GET", "/available_actions", params=q) == {"has_search_bar": True, "clickables": ["search"]}
    assert exchange(u, "GET", "/instruction_text", params=q) == INSTR
    assert exchange(u, "GET", "/observation", params=q) == START
    assert exchange(u, "GET", "/state", params=q)["url"] == "/209"

    step = {"env_idx": 0, "action": "search[Zelorra phone case]"}
    assert exchange(u, "POST", "/step", step) == {"state": RESULTS, "reward": 0.0, "done": False, "info": None}
    assert exchange(u, "GET", "/available_actions", params=q) == {
        "has_search_bar": False,
        "clickables": [
            "back to search",
            "next >",
            "b0x7anodzg",
            "b0sqwvbjo1",
            "b07wdujfts",
            "b0u7r5cue8",
            "b092nqmyja",
            "b0759x0dv9",
            "b0ii6cb9ut",
            "b0ryxe0xrs",
            "b0pkhj4omr",
            "b0ijzcxz9y",
        ],
    }

    for action, page in [
        ("click[B0X7ANODZG]", ITEM),
        ("click[lavender purple]", ITEM),
        ("click[features]", FEATURES),
        ("click[< prev]", ITEM),
        ("click[wine red | sky blue]", ITEM),
        ("click[pixel 8]", ITEM),
    ]:
        got = exchange(u, "POST", "/step", {"env_idx": 0, "action": action})
        assert got == {"state": page, "reward": 0.0, "done": False, "info": None}, action
    assert exchange(u, "GET", "/available_actions", params=q) == {
        "has_search_bar": False,
        "clickables": [
            "back to search",
            "< prev",
            "description",
            "features",
            "reviews",
            "buy now",
            "clear",
            "matte black",
            "lavender purple",
            "wine red | sky blue",
            "b-mint green",
            "iphone 15",
            "galaxy s24",
            "pixel 8",
        ],
    }
    assert exchange(u, "GET", "/observation", params=q) == ITEM
    state = exchange(u, "GET", "/state", params=q)
    assert state["url"] == (
        "/item_page/209/B0X7ANODZG/zelorra%20phone%20case/1/%7B%22color%22%3A%20%22wine%20red"
        "%20%7C%20sky%20blue%22%2C%20%22size%22%3A%20%22pixel%208%22%7D"
    )
    assert state["instruction_text"] == INSTR
    assert '<input type="radio" name="color" value="wine red | sky blue" checked> wine red | sky blue' in state["html"]

    # the second colour click replaced the first: both goal options are selected; 2 attributes, 2 options and the
    # price ($7.00, the low end of the range, under 40) all hold, so (2 + 2 + 1) / (2 + 2 + 1) = 1.0
    assert exchange(u, "POST", "/step", {"env_idx": 0, "action": "click[Buy Now]"}) == {
        "state": END,
        "reward": 1.0,
        "done": True,
        "info": full_marks("B0X7ANODZG", 7.0, 40.0, attrs=2, options=2),
    }
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
