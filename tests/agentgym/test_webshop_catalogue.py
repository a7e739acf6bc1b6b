"""The generated catalogue and the loader (ours and a user's WebShop-format files)."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from script_modules import load_script, warm_start_args

from agentgym.webshop import catalogue
from agentgym.webshop.data import DEV_SIZE, NO_PRICE_LIMIT, TEST_SIZE, load_shop, session_ids
from agentgym.webshop.reward import options_match


def test_generation_is_deterministic() -> None:
    first = json.dumps(catalogue.generate(7))
    assert json.dumps(catalogue.generate(7)) == first
    assert json.dumps(catalogue.generate(8)) != first


def test_catalogue_size_and_categories(shop: Any) -> None:
    assert len(shop.products) == 1000
    assert Counter(p.category for p in shop.products) == {
        c: 200 for c in ("beauty", "electronics", "fashion", "garden", "grocery")
    }
    assert len(shop.goals) >= 2000
    asins = [p.asin for p in shop.products]
    assert len(set(asins)) == len(asins)
    assert all(re.fullmatch(r"[A-Z0-9]{10}", a) for a in asins)


def test_products_are_complete(shop: Any) -> None:
    for p in shop.products:
        assert p.title and p.query and len(p.bullets) >= 3 and len(p.attributes) >= 3
        assert len(p.product_category.split(" › ")) >= 3
        assert re.fullmatch(r"\$\d+\.\d\d( to \$\d+\.\d\d)?", p.price_text)
        for attribute in p.attributes:  # every attribute is in a bullet, where a shopper can read it
            assert any(attribute in bullet for bullet in p.bullets)
        values = [v for vs in p.options.values() for v in vs]
        assert len(values) == len(set(values))  # no value in two groups: a click names one option
        if match := re.search(r"\(Color : (.+)\)$", p.title):  # a title names a colour the product offers
            assert match.group(1).lower() in p.options["color"]
        for group_values in p.options.values():
            assert not any(options_match(a, b) for i, a in enumerate(group_values) for b in group_values[i + 1 :])


def test_catalogue_has_the_shapes_of_real_pages(shop: Any) -> None:
    """Measured on a sample of WebShop's original files (README): titles average ~125 characters (10% under 58,
    10% over 189), 40% of products have options (0.56 groups a product, ~5.5 values a group, values like
    ``a1-black``), 8% of prices are ranges and 9% missing, most products have no description."""
    titles = sorted(len(p.title) for p in shop.products)
    assert 110 <= sum(titles) / len(titles) <= 140 and titles[100] <= 75 and titles[900] >= 170
    with_options = [p for p in shop.products if p.options]
    assert 330 <= len(with_options) <= 470
    assert 0.45 <= sum(len(p.options) for p in shop.products) / 1000 <= 0.65
    per_group = [len(vs) for p in with_options for vs in p.options.values()]
    assert 4.5 <= sum(per_group) / len(per_group) <= 6.5 and max(per_group) >= 15
    values = [v for p in with_options for vs in p.options.values() for v in vs]
    assert sum(any(c.isdigit() for c in v) or "-" in v or "|" in v for v in values) / len(values) >= 0.35
    raw = json.loads((shop.data_dir / catalogue.PRODUCTS_FILE).read_text())
    assert 40 <= sum(r["pricing"].count("$") == 2 for r in raw) <= 120
    assert 50 <= sum(r["pricing"] == "" for r in raw) <= 130
    assert 200 <= sum(bool(p.description) for p in shop.products) <= 450


def test_goals_fit_their_products(shop: Any) -> None:
    for g in shop.goals:
        p = shop.by_asin[g.asin]
        assert set(g.attributes) <= set(p.attributes)
        assert all(any(o in vs for vs in p.options.values()) for o in g.options)
        assert p.price < g.price_upper
        assert g.instruction.endswith(f", and price lower than {g.price_upper:.2f} dollars")
        assert (g.query, g.name, g.product_category) == (p.query, p.title, p.product_category)
    assert [g.session_id for g in shop.goals] == list(range(len(shop.goals)))


def test_phrasing_varies(shop: Any) -> None:
    openings = Counter(" ".join(g.instruction.split()[:3]) for g in shop.goals)
    assert len(openings) >= 90
    assert openings.most_common(1)[0][1] < len(shop.goals) / 6  # "i want to" opens two of the twenty leads
    assert len({g.instruction.split(" with ")[0] for g in shop.goals}) >= 950  # one request per product


def test_split(shop: Any) -> None:
    assert shop.session_ids("test") == range(0, TEST_SIZE) == session_ids("test")
    assert shop.session_ids("dev") == range(TEST_SIZE, TEST_SIZE + DEV_SIZE) == session_ids("dev")
    assert shop.session_ids("train") == range(TEST_SIZE + DEV_SIZE, len(shop.goals)) == session_ids("train")
    with pytest.raises(ValueError, match="unknown split 'valid'; expected 'train', 'dev' or 'test'"):
        shop.session_ids("valid")


def test_human_goals(shop: Any) -> None:
    human = load_shop(goal_source="human")
    assert human.products == shop.products
    assert human.products_hash == shop.products_hash and human.data_hash != shop.data_hash
    per_product = Counter(g.asin for g in human.goals)
    assert all(1 <= per_product[p.asin] <= 3 for p in shop.products if p.options)  # 1-3 requests with options
    assert 100 <= sum(p.asin in per_product for p in shop.products if not p.options) <= 260  # 30% without
    for g in human.goals:
        p = human.by_asin[g.asin]
        assert all(any(o in vs for vs in p.options.values()) for o in g.options)
        assert not g.instruction.split(", and price lower than")[0].endswith(".")


def _write_user_data(root: Path) -> None:
    products = [
        {
            "asin": "B0USER0001",
            "name": "Tiny Test Hoodie",
            "pricing": "$3.78 - $11.38",
            "category": "fashion",
            "query": "hoodie",
            "product_category": "Clothing › Men › Hoodies",
            "small_description": ["WARM"],
            "full_description": "A hoodie.",
            "customization_options": {
                "Color": [{"value": "Black/White"}, {"value": "Navy"}],
                "Size": [{"value": "Small"}, {"value": "Large"}],
            },
        },
        {
            "asin": "B0USER0002",
            "name": "Tiny Test Sofa",
            "pricing": "$985.00",
            "category": "garden",
            "query": "sofa",
            "product_category": "Home › Furniture › Sofas",
            "small_description": "COMFY",
            "full_description": "",
            "customization_options": None,
        },
        {
            "asin": "B0USER0003",
            "name": "Product Without Instruction",
            "pricing": "",
            "category": "grocery",
            "query": "tea",
            "product_category": "Food › Tea",
            "small_description": [],
            "full_description": "",
            "customization_options": {},
        },
    ]
    ins = {
        "B0USER0001": {
            "attributes": ["warm", "soft"],
            "instruction": "i want a warm hoodie",
            "instruction_attributes": ["warm"],
        },
        "B0USER0002": {
            "attributes": ["comfy"],
            "instruction": "i want a comfy sofa",
            "instruction_attributes": ["comfy"],
        },
    }
    human = {
        "B0USER0001": [
            {
                "asin": "B0USER0001",
                "instruction": "A soft hoodie in navy.",
                "instruction_attributes": ["soft"],
                "instruction_options": ["Navy"],
            }
        ]
    }
    for name, payload in zip(catalogue.DATA_FILES, (products, ins, human)):
        (root / name).write_text(json.dumps(payload))


def test_user_data_dir_synthetic(tmp_path: Path, shop: Any) -> None:
    _write_user_data(tmp_path)
    user = load_shop(tmp_path)
    assert user.data_hash != shop.data_hash
    hoodie, sofa, tea = user.products
    assert (hoodie.price, hoodie.price_text) == (3.78, "$3.78 to $11.38")
    assert hoodie.options == {"color": ("black | white", "navy"), "size": ("small", "large")}
    assert hoodie.bullets == ("WARM",) and sofa.bullets == ("COMFY",)
    assert (tea.price, tea.price_text, tea.attributes) == (100.0, "$100.00", ())
    # hoodie: 2 x 2 option combinations; sofa: no options, one goal; tea: no instruction, no goal
    texts = sorted(g.instruction for g in user.goals)
    upper = {g.asin: g.price_upper for g in user.goals}
    assert upper["B0USER0001"] in (20.0, 30.0, 40.0)  # larger of two of 10, 20, 30, 40
    assert upper["B0USER0002"] == NO_PRICE_LIMIT  # only 990 lies above 985: no price clause
    clause = f", and price lower than {upper['B0USER0001']:.2f} dollars"
    assert texts == sorted(
        [
            "i want a comfy sofa",
            f"i want a warm hoodie with color: black | white, and size: large{clause}",
            f"i want a warm hoodie with color: black | white, and size: small{clause}",
            f"i want a warm hoodie with color: navy, and size: large{clause}",
            f"i want a warm hoodie with color: navy, and size: small{clause}",
        ]
    )


def test_user_data_dir_human_and_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_user_data(tmp_path)
    monkeypatch.setenv("WEBSHOP_DATA_DIR", str(tmp_path))
    user = load_shop(goal_source="human")
    assert user.data_dir == tmp_path.resolve()
    (goal,) = user.goals
    assert goal.instruction.startswith("A soft hoodie in navy, and price lower than ")
    assert (goal.options, goal.attributes) == (("navy",), ("soft",))


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="items_shuffle_1000.json"):
        load_shop(tmp_path)
    with pytest.raises(ValueError, match="goal_source"):
        load_shop(goal_source="both")  # type: ignore[arg-type]


def test_prepared_data_and_warm_start_key_follow_the_catalogue(
    tmp_path: Path, shop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another catalogue means other tasks: ``prepare_data --if_changed`` rewrites the parquet files and the warm
    start gets another cache key; the same catalogue leaves both as they were."""
    import pandas as pd

    prepare, warm_start = load_script("prepare_data"), load_script("warm_start")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    args = warm_start_args()
    out = tmp_path / "data"
    argv = ["prepare_data.py", "--env_name", "webshop", "--out", str(out), "--if_changed"]

    def prepared() -> tuple[str, int, float]:
        monkeypatch.setattr(sys, "argv", argv)
        assert prepare.main() == 0
        frame = pd.read_parquet(out / "webshop" / "test.parquet")
        return frame.prompt[0][0]["content"], len(frame), (out / "webshop" / "test.parquet").stat().st_mtime_ns

    first, key = prepared(), warm_start.cache_key(args, model, "float32")
    assert first[:2] == (shop.goal(0).instruction, TEST_SIZE)
    assert prepared() == first and warm_start.cache_key(args, model, "float32") == key  # unchanged: not rewritten

    user = tmp_path / "user"
    user.mkdir()
    _write_user_data(user)
    monkeypatch.setenv("WEBSHOP_DATA_DIR", str(user))
    other = prepared()
    assert other[1] == 5 and other[0] != first[0]  # the user catalogue's five goals, all in test
    assert warm_start.cache_key(args, model, "float32") != key
