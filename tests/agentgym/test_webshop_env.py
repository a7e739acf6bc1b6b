"""The WebShop page state machine and search, in process (no HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bm25s
import pytest

from agentgym.open_envs import EpisodeStateError, InvalidRequestError
from agentgym.webshop.env import WebShopEnv
from agentgym.webshop.search import SearchEngine, stem, tokenize


@pytest.fixture(scope="module")
def engine(shop: Any, cache_dir: Path) -> SearchEngine:
    return SearchEngine(shop.products, shop.products_hash, cache_dir)


@pytest.fixture()
def env(shop: Any, engine: SearchEngine) -> WebShopEnv:
    return WebShopEnv(shop, engine)


def test_stemmer_and_tokenizer() -> None:
    assert [stem(w) for w in ("extensions", "batteries", "boxes", "glass", "charging", "padded", "speed")] == [
        "extension",
        "battery",
        "box",
        "glass",
        "charg",
        "padd",
        "speed",
    ]
    assert tokenize("The Hair-Extensions for a wedding!") == ["hair", "extension", "wedd"]


def test_search_finds_products_by_title(shop: Any, engine: SearchEngine) -> None:
    for i in range(0, 1000, 50):
        assert i in engine.search(shop.products[i].title)[:10]
    assert engine.search("zzqqxx") == [] and engine.search("the and of") == []
    assert len(engine.search("black")) == 50


def test_index_is_loaded_from_cache(
    shop: Any, engine: SearchEngine, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert list((cache_dir / "webshop").glob(f"index-v*-{shop.products_hash}/params.index.json"))

    def no_indexing(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("index rebuilt instead of loaded")

    monkeypatch.setattr(bm25s.BM25, "index", no_indexing)
    again = SearchEngine(shop.products, shop.products_hash, cache_dir)
    assert again.search("wireless earbuds") == engine.search("wireless earbuds")


def test_start_page_and_reset_errors(shop: Any, env: WebShopEnv) -> None:
    with pytest.raises(EpisodeStateError):
        env.step("search[shoes]")
    obs = env.reset(3)
    assert obs == f"WebShop [SEP] Instruction: [SEP] {shop.goal(3).instruction} [SEP] Search"
    assert env.available_actions() == {"has_search_bar": True, "clickables": ["search"]}
    with pytest.raises(InvalidRequestError):
        env.reset(len(shop.goals))
    with pytest.raises(InvalidRequestError):
        env.reset(-1)


def test_invalid_actions_change_nothing(env: WebShopEnv) -> None:
    start = env.reset(0)
    for action in (
        "click[search]",
        "search[]",
        "search[   ]",
        "click[buy now]",
        "click[next >]",
        "buy",
        "search shoes",
        "click[b0000000000]",
        "",
        "\x00\xff",
    ):
        r = env.step(action)
        assert (r.observation, r.reward, r.done, r.extra["info"]) == (start, 0.0, False, None), action
    results = env.step("search[running shoes]").observation
    for action in ("search[socks]", "click[< prev]", "click[description]", "click[buy now]"):
        assert env.step(action).observation == results


def test_pagination(shop: Any, env: WebShopEnv) -> None:
    instr = shop.goal(0).instruction
    env.reset(0)
    page1 = env.step("SEARCH[Running Shoes]").observation
    head = f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] "
    assert page1.startswith(head + "Page 1 (Total results: 50) [SEP] Next > [SEP] ")
    assert env.available_actions()["clickables"][:2] == ["back to search", "next >"]
    assert len(env.available_actions()["clickables"]) == 12
    page2 = env.step("click[Next >]").observation
    assert page2.startswith(head + "Page 2 (Total results: 50) [SEP] < Prev [SEP] Next > [SEP] ")
    for _ in range(3):
        last = env.step("click[next >]").observation
    assert last.startswith(head + "Page 5 (Total results: 50) [SEP] < Prev [SEP] B0")
    assert env.step("click[next >]").observation == last  # no page 6
    assert env.step("click[< prev]").observation.startswith(head + "Page 4 ")
    # every page lists 10 products as ASIN, title, price
    hits = env._engine.search("running shoes")
    assert len(hits) == 50
    p = shop.products[hits[0]]
    assert page1 == head + "Page 1 (Total results: 50) [SEP] Next > [SEP] " + " [SEP] ".join(
        f"{shop.products[i].asin} [SEP] {shop.products[i].title} [SEP] {shop.products[i].price_text}" for i in hits[:10]
    )
    assert p.asin in page1


def test_item_page_options_and_sub_pages(shop: Any, env: WebShopEnv) -> None:
    goal = next(g for g in shop.goals if shop.by_asin[g.asin].options and shop.by_asin[g.asin].description)
    product = shop.by_asin[goal.asin]
    env.reset(goal.session_id)
    results = env.step(f"search[{product.title}]").observation
    item = env.step(f"click[{product.asin.lower()}]").observation
    opts = "".join(f" [SEP] {g} [SEP] " + " [SEP] ".join(vs) for g, vs in product.options.items())
    assert item == (
        f"Instruction: [SEP] {goal.instruction} [SEP] Back to Search [SEP] < Prev{opts} [SEP] "
        f"{product.title} [SEP] Price: {product.price_text} [SEP] Rating: N.A. [SEP] "
        "Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    values = [v for vs in product.options.values() for v in vs]
    assert env.available_actions() == {
        "has_search_bar": False,
        "clickables": ["back to search", "< prev", "description", "features", "reviews", "buy now", *values],
    }
    assert env.step(f"click[{values[0]}]").observation == item  # selecting keeps the page
    head = f"Instruction: [SEP] {goal.instruction} [SEP] Back to Search [SEP] < Prev"
    assert env.step("click[features]").observation == head + " [SEP] " + " [SEP] ".join(product.bullets)
    assert env.step("click[< prev]").observation == item
    assert env.step("click[description]").observation == f"{head} [SEP] {product.description}"
    env.step("click[< prev]")
    assert env.step("click[reviews]").observation == head
    env.step("click[< prev]")
    assert env.step("click[attributes]").observation == item  # no Attributes button by default
    assert env.step("click[< prev]").observation == results
    assert env.step("click[back to search]").observation == env.reset(goal.session_id)


def test_attributes_page_when_shown(shop: Any, engine: SearchEngine) -> None:
    env = WebShopEnv(shop, engine, show_attrs=True)
    product = shop.by_asin[shop.goal(0).asin]
    env.reset(0)
    env.step(f"search[{product.title}]")
    item = env.step(f"click[{product.asin}]").observation
    assert item.endswith("Description [SEP] Features [SEP] Reviews [SEP] Attributes [SEP] Buy Now")
    page = env.step("click[attributes]").observation
    assert page.endswith("< Prev [SEP] " + " [SEP] ".join(product.attributes))


def test_buy_ends_episode_without_leaking_target(shop: Any, env: WebShopEnv) -> None:
    goal = shop.goal(0)
    wrong = next(p for p in shop.products if p.query != goal.query)
    env.reset(0)
    env.step(f"search[{wrong.title}]")
    env.step(f"click[{wrong.asin}]")
    r = env.step("click[buy now]")
    assert r.done and 0.0 <= r.reward < 1.0
    info = r.extra["info"]
    assert info is not None and info["goal_asin"] == goal.asin and info["asin"] == wrong.asin
    assert r.observation == (
        f"Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] {round(r.reward, 4)}"
    )
    assert goal.asin not in r.observation and goal.asin not in env.state()["html"]
    assert env.available_actions() == {"has_search_bar": False, "clickables": []}
    with pytest.raises(EpisodeStateError):
        env.step("click[back to search]")
    assert env.reset(0).startswith("WebShop [SEP]")


def test_state_url_and_html(shop: Any, env: WebShopEnv) -> None:
    env.reset(5)
    assert env.state() == {
        "url": "/5",
        "instruction_text": shop.goal(5).instruction,
        "html": (
            '<html><body>\n<input id="search_input" type="text">\n<p>WebShop</p>\n<p>Instruction:</p>\n'
            f"<p>{shop.goal(5).instruction}</p>\n"
            '<button class="btn">Search</button>\n</body></html>'
        ),
    }
    env.step("search[red & black]")
    env.step("click[next >]")
    assert env.state()["url"] == "/search_results/5/red%20%26%20black/2"
