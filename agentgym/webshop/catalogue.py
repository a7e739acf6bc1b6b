"""Deterministic generator of a WebShop catalogue in WebShop's own file format.

``write_catalogue(out_dir, seed)`` writes the three files of the original
WebShop "small" data set, so the loader (``data.py``) reads ours and a user's
original files the same way:

* ``items_shuffle_1000.json``: a list of products, each with ``asin``,
  ``name``, ``brand``, ``category``, ``query``, ``product_category``
  (``›``-separated path), ``pricing`` (``"$12.99"`` or ``"$3.78 - $11.38"``),
  ``small_description`` (bullet list), ``full_description`` and
  ``customization_options`` (``{group: [{"value": v, "image": null}]}``).
* ``items_ins_v2_1000.json``: per ASIN ``attributes``, a synthetic
  ``instruction``, its ``instruction_attributes`` and ``instruction_options``
  (``{group: [values]}``, the option combinations the goals enumerate).
* ``items_human_ins.json``: per ASIN a list of human-style requests, each with
  ``instruction``, ``instruction_attributes`` and ``instruction_options`` (a
  list of option values).

The catalogue has ``PRODUCTS_PER_KIND`` products for each of the 50 product
kinds in ``vocab.py`` (1,000 products over beauty, electronics, fashion, food
and furniture) and yields over 5,000 synthetic goals.  Everything is drawn
from one ``random.Random(seed)`` stream over lists (never sets), so a seed
always gives byte-identical files.  Within a product's option group no two
values match each other under the reward's option matcher, so a wrong option
is always scored wrong.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import string
import tempfile
from pathlib import Path
from typing import Any

from .reward import options_match
from .vocab import BRAND_HEADS, BRAND_TAILS, CATEGORIES, KINDS, LEADS, Kind

CATALOGUE_VERSION = 1
DEFAULT_SEED = 1000
PRODUCTS_PER_KIND = 20
MAX_GOALS_PER_PRODUCT = 16

PRODUCTS_FILE = "items_shuffle_1000.json"
ATTRIBUTES_FILE = "items_ins_v2_1000.json"
HUMAN_FILE = "items_human_ins.json"
DATA_FILES = (PRODUCTS_FILE, ATTRIBUTES_FILE, HUMAN_FILE)

_SMALL_WORDS = {"and", "for", "with", "of", "in", "to", "on", "the", "a"}


def _title_case(text: str) -> str:
    words = text.split()
    return " ".join(w if (i and w in _SMALL_WORDS) or not w[0].isalpha() else w[0].upper() + w[1:]
                    for i, w in enumerate(words))


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _article(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _is_plural(ask: str) -> bool:
    head = ask.split(" for ")[0].split()[-1]
    return not ask.startswith(("a ", "an ")) and head.endswith("s") and not head.endswith("ss")


def _price_text(rng: random.Random, kind: Kind, has_options: bool) -> str:
    low = rng.uniform(*kind.price)
    cents = rng.choice((0.99, 0.95, 0.49, 0.97, 0.0))
    low = max(1.99, math.floor(low) + cents)
    if has_options and rng.random() < 0.3:
        high = math.floor(low * rng.uniform(1.2, 1.8)) + 0.99
        return f"${low:.2f} - ${high:.2f}"
    return f"${low:.2f}"


def _pick_options(rng: random.Random, kind: Kind) -> dict[str, list[str]]:
    """A few distinguishable values per group, in the kind's listed order."""
    if rng.random() < 0.1:
        return {}
    options: dict[str, list[str]] = {}
    for group, pool in kind.options.items():
        wanted = rng.randint(min(3, len(pool)), min(len(pool), 6))
        chosen: list[str] = []
        for value in rng.sample(pool, len(pool)):
            if len(chosen) < wanted and not any(options_match(value, c) for c in chosen):
                chosen.append(value)
        options[group] = sorted(chosen, key=pool.index)
    return options


def _goal_options(rng: random.Random, options: dict[str, list[str]]) -> dict[str, list[str]]:
    """The option subsets synthetic goals enumerate, at most MAX_GOALS_PER_PRODUCT combinations."""
    chosen: dict[str, list[str]] = {}
    budget = MAX_GOALS_PER_PRODUCT
    for group, values in options.items():
        most = max(1, min(len(values), budget, 5))
        k = rng.randint(max(1, most - 1), most)
        chosen[group] = sorted(rng.sample(values, k), key=values.index)
        budget = max(1, budget // k)
    return chosen


def _title(rng: random.Random, kind: Kind, brand: str, adjs: list[str], feats: list[str]) -> str:
    head = rng.choice(kind.heads)
    words = [brand]
    if adjs and rng.random() < 0.7 and not set(adjs[0].split()) & set(head.lower().split()):
        words.append(_title_case(adjs[0]))
    words.append(head)
    if kind.extras and rng.random() < 0.6:
        words.append(rng.choice(kind.extras))
    title = " ".join(words)
    tail = [_title_case(a) for a in adjs[1:2] + feats[:1] if rng.random() < 0.6]
    if tail:
        title += ", " + " ".join(tail) + " " + rng.choice(kind.heads).split()[-1]
    return title


_ADJ_BULLETS = (
    "{A}: this {noun} is {a}, which is what you notice from the first day of use.",
    "{A} - designed to be {a} without any extra effort on your part.",
    "{A}: we tested every batch so the {noun} stays {a} over time.",
    "{A} and reliable: customers choose this {noun} because it is {a}.",
)
_FEAT_BULLETS = (
    "{A}: comes with {a} for everyday convenience.",
    "Features {a} - a small detail that makes this {noun} easier to live with.",
    "{A} included: thoughtfully built around {a}.",
)
_CLOSERS = (
    "Worry-free purchase: reach our support team any time if the {noun} is not what you expected.",
    "Makes a thoughtful gift for friends and family.",
    "Package includes one {noun} and a quick start guide.",
)


def _bullets(rng: random.Random, kind: Kind, adjs: list[str], feats: list[str]) -> list[str]:
    lines = [rng.choice(_ADJ_BULLETS).format(A=a.upper(), a=a, noun=kind.noun) for a in adjs]
    lines += [rng.choice(_FEAT_BULLETS).format(A=f.upper(), a=f, noun=kind.noun) for f in feats]
    rng.shuffle(lines)
    lines.append(rng.choice(_CLOSERS).format(noun=kind.noun))
    return lines


def _description(rng: random.Random, kind: Kind, brand: str, adjs: list[str], feats: list[str]) -> str:
    sentences = [
        rng.choice((f"Meet the {brand} {kind.noun}.", f"{brand} made this {kind.noun} for people who care about the details.",
                    f"Looking for a better {kind.noun}? {brand} has you covered.")),
        f"It is {_join(adjs)}" + (f", and it comes with {_join(feats)}." if feats else "."),
    ]
    if kind.purposes:
        sentences.append(f"Ideal {rng.choice(kind.purposes)} or as an everyday pick.")
    sentences.append(rng.choice(("Order today and see the difference.", "Backed by our satisfaction promise.",
                                 "Thousands of happy customers can't be wrong.")))
    return " ".join(sentences)


def _request(rng: random.Random, kind: Kind, attrs: list[str]) -> str:
    """A shopper's request naming the kind and ``attrs``."""
    ask = rng.choice(kind.asks)
    plural = _is_plural(ask)
    adjs = [a for a in attrs if a in kind.adjs]
    feats = [a for a in attrs if a not in kind.adjs]
    if adjs and " of " not in ask and not set(adjs[0].split()) & set(ask.split()) and rng.random() < 0.4:
        counted = ask.startswith(("a ", "an "))
        bare = ask.split(" ", 1)[1] if counted else ask
        ask = _article(f"{adjs[0]} {bare}") if counted else f"{adjs[0]} {bare}"
        adjs = adjs[1:]
    parts = [rng.choice(LEADS), ask]
    adjs = [a for a in adjs if not set(a.split()) <= set(ask.split())]  # already said by the noun phrase
    if adjs:
        be = "are" if plural else "is"
        parts.append(rng.choice((f"that {be}", f"which {be}", "that's" if not plural else "that are")) + " " + _join(adjs))
    if feats:
        has = "have" if plural else "has"
        link = rng.choice(("with", f"that {has}", "featuring", "with"))
        parts.append(("," if adjs and rng.random() < 0.5 else "") + f" {link} {_join(feats)}")
    if kind.purposes and rng.random() < 0.3:
        parts.append(rng.choice(kind.purposes))
    return " ".join(parts).replace(" ,", ",").replace("  ", " ")


_OPTION_PHRASES = {
    "color": ("in {v}", "in {v} color", "in the color {v}"),
    "size": ("in size {v}", "size {v}", "in the {v} size"),
    "scent": ("in the {v} scent", "with a {v} scent", "{v} scented"),
    "flavor": ("in {v} flavor", "{v} flavored", "in the {v} flavor"),
}


def _human_request(rng: random.Random, kind: Kind, attrs: list[str], options: dict[str, list[str]]) -> tuple[str, list[str]]:
    text = _request(rng, kind, attrs)
    picked: list[str] = []
    for group, values in options.items():
        if rng.random() < 0.7:
            value = rng.choice(values)
            picked.append(value)
            text += (", " if rng.random() < 0.5 else " ") + rng.choice(_OPTION_PHRASES[group]).format(v=value)
    if rng.random() < 0.4:
        text = text[0].upper() + text[1:]
    return text + rng.choice((".", "", "")), picked


def _asin(rng: random.Random, seen: set[str]) -> str:
    alphabet = string.ascii_uppercase + string.digits
    while True:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in seen:
            seen.add(asin)
            return asin


def generate(seed: int = DEFAULT_SEED) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Build (products, instruction attributes by ASIN, human requests by ASIN)."""
    rng = random.Random(seed)
    brands = [h + t for h in BRAND_HEADS for t in BRAND_TAILS]
    rng.shuffle(brands)
    per_category = len(brands) // len(CATEGORIES)
    brand_pool = {c: brands[i * per_category:(i + 1) * per_category] for i, c in enumerate(CATEGORIES)}
    products: list[dict[str, Any]] = []
    ins: dict[str, Any] = {}
    human: dict[str, Any] = {}
    seen: set[str] = set()
    for kind in KINDS:
        for _ in range(PRODUCTS_PER_KIND):
            asin = _asin(rng, seen)
            brand = rng.choice(brand_pool[kind.category])
            adjs = rng.sample(kind.adjs, rng.randint(2, min(4, len(kind.adjs))))
            feats = rng.sample(kind.feats, rng.randint(1, 2))
            options = _pick_options(rng, kind)
            products.append({
                "asin": asin,
                "name": _title(rng, kind, brand, adjs, feats),
                "brand": brand,
                "category": kind.category,
                "query": kind.query,
                "product_category": kind.path,
                "pricing": _price_text(rng, kind, bool(options)),
                "small_description": _bullets(rng, kind, adjs, feats),
                "full_description": _description(rng, kind, brand, adjs, feats),
                "customization_options": {g: [{"value": v, "image": None} for v in vs] for g, vs in options.items()},
            })
            attributes = adjs + feats
            goal_attrs = rng.sample(attributes, rng.randint(1, min(3, len(attributes))))
            instruction = _request(rng, kind, goal_attrs)
            ins[asin] = {
                "attributes": attributes,
                "instruction": instruction,
                "instruction_attributes": goal_attrs,
                "instruction_options": _goal_options(rng, options),
            }
            human_attrs = rng.sample(attributes, rng.randint(1, min(2, len(attributes))))
            text, picked = _human_request(rng, kind, human_attrs, options)
            human[asin] = [{"asin": asin, "instruction": text, "instruction_attributes": human_attrs,
                            "instruction_options": picked}]
    rng.shuffle(products)
    return products, ins, human


def write_catalogue(out_dir: Path, seed: int = DEFAULT_SEED) -> Path:
    """Write the three files into ``out_dir`` (atomically: all or nothing)."""
    out_dir = Path(out_dir)
    if all((out_dir / name).is_file() for name in DATA_FILES):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".catalogue-", dir=out_dir.parent))
    try:
        for name, payload in zip(DATA_FILES, generate(seed)):
            (tmp / name).write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
        try:
            os.rename(tmp, out_dir)
        except OSError:  # another process finished first; its files are identical
            if not all((out_dir / name).is_file() for name in DATA_FILES):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def generated_catalogue_dir(cache_root: Path, seed: int = DEFAULT_SEED) -> Path:
    """The directory of the generated catalogue under ``cache_root``, written on first use."""
    return write_catalogue(Path(cache_root) / "webshop" / f"catalogue-v{CATALOGUE_VERSION}-seed{seed}", seed)
