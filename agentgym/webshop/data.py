"""Load a WebShop catalogue (ours or the original files) into products and goals.

Public API (torch-free; what the agent and data preparation use)::

    from agentgym.webshop.data import load_shop, session_ids
    shop = load_shop()                  # or load_shop("/path/to/webshop/data", goal_source="human")
    shop.products, shop.goals           # lists of Product / Goal; goal i has session_id i
    shop.goal(17).instruction           # the text the shopper sees for session 17
    session_ids("test")                 # range(0, 500); "dev" -> range(500, 700); "train" -> range(700, len(goals))

Where the data comes from: the ``data_dir`` argument, else ``$WEBSHOP_DATA_DIR``,
else our generated catalogue (``catalogue.py``), written on first use under
``cache_root()/webshop/`` (``$OPENMANUS_CACHE`` or ``~/.cache/openmanus_rl``).
A data directory holds WebShop's files ``items_shuffle_1000.json`` (products)
with ``items_ins_v2_1000.json`` (synthetic goals, the default) and/or
``items_human_ins.json`` (``goal_source="human"``).

Goals are built as WebShop builds them:

* synthetic: one goal per combination of option values of a product that has
  an instruction (over its ``instruction_options`` when given, else over all
  its options); text ``<instruction> with <name>: <value>, and <name>: <value>``
  (names sorted) followed by the price clause;
* human: one goal per human request with attributes; text is the request
  without trailing full stops, followed by the price clause.

The price clause is ``, and price lower than <upper>.00 dollars`` where
``upper`` is the larger of two multiples of 10 drawn (seeded, once per
product) from the first four multiples of 10 above the product's price; when
fewer than two exist there is no clause and ``price_upper`` is 1,000,000.
A product's price is the low end of its price range, so rewards never depend
on a random draw.  The goal list is then shuffled with a fixed seed; the
session id is the index in that list.  Split: the first ``TEST_SIZE`` session
ids are ``test``, the next ``DEV_SIZE`` ``dev`` (early stopping, held-out SFT
loss, RL validation), the rest ``train`` (demonstrations and RL).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..cache import cache_root
from ..splits import Split, check_split
from .catalogue import ATTRIBUTES_FILE, HUMAN_FILE, PRODUCTS_FILE, generated_catalogue_dir

GoalSource = Literal["synthetic", "human"]

DEV_SIZE = 200
TEST_SIZE = 500
GOAL_SHUFFLE_SEED = 233
PRICE_SEED = 0
NO_PRICE_LIMIT = 1_000_000.0
_PRICE_STEPS = [10.0 * i for i in range(1, 100)]


@dataclass(frozen=True)
class Product:
    asin: str
    title: str
    brand: str
    category: str
    query: str
    product_category: str
    price: float  # what the shopper pays: the low end of the price range
    price_text: str  # as shown: "$12.99" or "$3.78 to $11.38"
    bullets: tuple[str, ...]
    description: str
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]  # group -> values, lower-case


@dataclass(frozen=True)
class Goal:
    session_id: int
    asin: str  # the product the goal was written from
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]  # wanted option values
    price_upper: float
    query: str
    category: str
    product_category: str
    name: str  # the target product's title


@dataclass(frozen=True)
class Shop:
    products: list[Product]
    goals: list[Goal]
    data_dir: Path
    data_hash: str  # of the files read and the goal source
    products_hash: str  # of the product file alone (keys the search index)
    goal_source: GoalSource

    @functools.cached_property
    def by_asin(self) -> dict[str, Product]:
        return {p.asin: p for p in self.products}

    def goal(self, session_id: int) -> Goal:
        return self.goals[session_id]

    def session_ids(self, split: Split) -> range:
        """Disjoint id ranges: ``test`` first, then ``dev``, then ``train``."""
        check_split(split)
        cut = min(TEST_SIZE, len(self.goals))
        dev_end = min(cut + DEV_SIZE, len(self.goals))
        return {"test": range(0, cut), "dev": range(cut, dev_end), "train": range(dev_end, len(self.goals))}[split]


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The argument, else ``$WEBSHOP_DATA_DIR``, else the generated catalogue."""
    chosen = data_dir or os.environ.get("WEBSHOP_DATA_DIR")
    if chosen:
        path = Path(chosen).expanduser().resolve()
        if not (path / PRODUCTS_FILE).is_file():
            raise FileNotFoundError(f"{path} has no {PRODUCTS_FILE}; expected WebShop's data files there")
        return path
    return generated_catalogue_dir(cache_root())


def _parse_pricing(pricing: Any) -> tuple[float, str]:
    values = [float(v) for v in re.findall(r"\$\s*([\d,]*\.?\d+)", str(pricing or "").replace(",", ""))][:2]
    if not values:
        values = [100.0]
    text = " to ".join(f"${v:.2f}" for v in values)
    return values[0], text


def _product(raw: dict[str, Any], attributes: list[str]) -> Product:
    price, price_text = _parse_pricing(raw.get("pricing"))
    bullets = raw.get("small_description") or []
    options: dict[str, tuple[str, ...]] = {}
    for group, entries in (raw.get("customization_options") or {}).items():
        values = [str(e.get("value", "")).strip().replace("/", " | ").lower() for e in entries or []]
        if values := [v for v in values if v]:
            options[group.strip().lower()] = tuple(values)
    return Product(
        asin=str(raw["asin"]),
        title=str(raw["name"]).strip(),
        brand=str(raw.get("brand") or ""),
        category=str(raw.get("category") or ""),
        query=str(raw.get("query") or ""),
        product_category=str(raw.get("product_category") or ""),
        price=price,
        price_text=price_text,
        bullets=tuple(bullets) if isinstance(bullets, list) else (str(bullets),),
        description=str(raw.get("full_description") or ""),
        attributes=tuple(attributes),
        options=options,
    )


def parse_products(raw_products: list[dict[str, Any]], ins: dict[str, Any]) -> list[Product]:
    """Products as the env reads them from the product file's entries (the first entry of an ASIN wins; entries
    without an ASIN or a name are skipped), with attributes from ``ins`` (the synthetic goal file) by ASIN."""
    products: list[Product] = []
    seen: set[str] = set()
    for raw in raw_products:
        if raw.get("asin") and raw.get("name") and raw["asin"] not in seen:
            seen.add(raw["asin"])
            products.append(_product(raw, (ins.get(raw["asin"]) or {}).get("attributes") or []))
    return products


def _price_limit(rng: random.Random, price: float) -> tuple[float, str]:
    steps = [p for p in _PRICE_STEPS if p > price][:4]
    if len(steps) < 2:
        return NO_PRICE_LIMIT, ""
    upper = max(rng.sample(steps, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def _goal(product: Product, text: str, attributes: list[str], options: list[str], upper: float) -> dict[str, Any]:
    return dict(
        asin=product.asin,
        instruction=text,
        attributes=tuple(attributes),
        options=tuple(options),
        price_upper=upper,
        query=product.query,
        category=product.category,
        product_category=product.product_category,
        name=product.title,
    )


def _synthetic_goals(products: list[Product], ins: dict[str, Any]) -> list[dict[str, Any]]:
    rng = random.Random(PRICE_SEED)
    goals = []
    for product in products:
        entry = ins.get(product.asin) or {}
        if not entry.get("instruction") or not entry.get("instruction_attributes"):
            continue
        upper, price_clause = _price_limit(rng, product.price)
        wanted = entry.get("instruction_options")
        groups = (
            {g.lower(): [v.lower() for v in vs] for g, vs in wanted.items()}
            if isinstance(wanted, dict) and wanted
            else {g: list(vs) for g, vs in product.options.items()}
        )
        names = sorted(groups)
        for combo in itertools.product(*(groups[n] for n in names)):
            option_text = ", and ".join(f"{n}: {v}" for n, v in zip(names, combo))
            text = entry["instruction"] + (f" with {option_text}" if option_text else "") + price_clause
            goals.append(_goal(product, text, entry["instruction_attributes"], list(combo), upper))
    return goals


def _human_goals(products: list[Product], human: dict[str, Any]) -> list[dict[str, Any]]:
    rng = random.Random(PRICE_SEED)
    goals = []
    for product in products:
        requests = human.get(product.asin)
        if not requests:
            continue
        upper, price_clause = _price_limit(rng, product.price)
        for request in requests:
            if request.get("instruction_attributes"):
                text = request["instruction"].strip(".") + price_clause
                goals.append(
                    _goal(
                        product,
                        text,
                        request["instruction_attributes"],
                        [str(v).lower() for v in request.get("instruction_options") or []],
                        upper,
                    )
                )
    return goals


def _read_json(path: Path, *digests: Any) -> Any:
    """Parse ``path``, feeding its name and bytes to each hashlib digest."""
    raw = path.read_bytes()
    for digest in digests:
        digest.update(path.name.encode() + b"\0" + raw)
    return json.loads(raw)


@functools.lru_cache(maxsize=4)
def _load(data_dir: Path, goal_source: GoalSource) -> Shop:
    digest = hashlib.sha256(goal_source.encode())
    products_digest = hashlib.sha256()
    raw_products = _read_json(data_dir / PRODUCTS_FILE, digest, products_digest)
    goal_file = ATTRIBUTES_FILE if goal_source == "synthetic" else HUMAN_FILE
    if not (data_dir / goal_file).is_file():
        raise FileNotFoundError(f"{data_dir} has no {goal_file}, needed for {goal_source} goals")
    goal_data = _read_json(data_dir / goal_file, digest)
    ins = (
        goal_data
        if goal_source == "synthetic"
        else (_read_json(data_dir / ATTRIBUTES_FILE, digest) if (data_dir / ATTRIBUTES_FILE).is_file() else {})
    )
    products = parse_products(raw_products, ins)
    build = _synthetic_goals if goal_source == "synthetic" else _human_goals
    goal_dicts = build(products, goal_data)
    random.Random(GOAL_SHUFFLE_SEED).shuffle(goal_dicts)
    goals = [Goal(session_id=i, **g) for i, g in enumerate(goal_dicts)]
    if not goals:
        raise ValueError(f"no goals could be built from {data_dir} ({goal_source})")
    return Shop(
        products=products,
        goals=goals,
        data_dir=data_dir,
        data_hash=digest.hexdigest()[:16],
        products_hash=products_digest.hexdigest()[:16],
        goal_source=goal_source,
    )


def load_shop(data_dir: str | os.PathLike[str] | None = None, goal_source: GoalSource = "synthetic") -> Shop:
    """Products and goals of the catalogue in ``data_dir`` (see the module docstring)."""
    if goal_source not in ("synthetic", "human"):
        raise ValueError(f"unknown goal_source {goal_source!r}; expected 'synthetic' or 'human'")
    return _load(resolve_data_dir(data_dir), goal_source)


def session_ids(
    split: Split, data_dir: str | os.PathLike[str] | None = None, goal_source: GoalSource = "synthetic"
) -> range:
    """Session ids (goal indices) of the ``train`` or ``test`` split."""
    return load_shop(data_dir, goal_source).session_ids(split)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(session id, instruction)]`` of ``split`` (``train``, ``dev`` or ``test``):
    the env's task list for datasets."""
    shop = load_shop()
    return [(i, shop.goal(i).instruction) for i in shop.session_ids(split)]
