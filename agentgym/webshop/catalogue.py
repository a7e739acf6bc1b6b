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
kinds in ``vocab.json`` (1,000 products over WebShop's categories beauty,
electronics, fashion, garden and grocery) and yields about 2,400 synthetic
goals.  Its shapes follow statistics of WebShop's original files (the constants
below; ``scripts/webshop_catalogue_stats.py`` compares): long titles padded
with selling points, most products without options and the rest with one to
three groups of long-tailed size, values written the odd ways real listings
write them, a few price ranges and missing prices, bullets that carry every
attribute, mostly no description.  Everything is drawn from one
``random.Random(seed)`` stream over lists (never sets), so a seed always gives
byte-identical files.  Within a product's option group no two values match each
other under the reward's option matcher, so a wrong option is always scored
wrong, and no value is offered in two groups.
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
from .vocab import (
    BRAND_HEADS,
    BRAND_TAILS,
    BULLET_BODIES,
    BULLET_FEATURE_BODIES,
    BULLET_FILLERS,
    BULLET_LEADS,
    CATEGORIES,
    COLOR_CODES,
    EXTRA_GROUPS,
    KINDS,
    LEADS,
    MORE_VALUES,
    TITLE_PADS,
    Kind,
)

CATALOGUE_VERSION = 2
DEFAULT_SEED = 1000
PRODUCTS_PER_KIND = 20
MAX_GOALS_PER_PRODUCT = 16

# Shapes measured on a sample of WebShop's original files (102 products, 225 human goals; the README's catalogue
# table, made by scripts/webshop_catalogue_stats.py, shows ours beside it): how long titles are, how many products
# have options, how many groups and values they offer, how many attributes and options a goal asks for, how
# prices are given and how many products have a description.
TITLE_LENGTHS = (40, 50, 60, 70, 85, 95, 105, 115, 120, 125, 130, 140, 150, 165, 175, 190, 200, 215)
NO_OPTIONS_SHARE = 0.6
OPTION_GROUPS = (65, 33, 2)  # weights of 1, 2, 3 option groups, for a product with options
VALUES_PER_GROUP = (
    6,
    12,
    14,
    14,
    11,
    9,
    7,
    6,
    4,
    4,
    3,
    2,
    2,
    2,
    1,
    1,
    1,
    1,
    1,
    1,
    1,
    1,
    1,
    1,
    1,
)  # of 1, 2, ... values
GOAL_ATTRIBUTES = (63, 29, 8)  # weights of 1, 2, 3 attributes in a goal
GOAL_GROUPS = (5, 60, 35)  # weights of a goal naming 0, 1, 2 of its product's option groups
COLOR_VARIANT_SHARE = 0.5
VARIANT_IN_TITLE_SHARE = 0.3
RANGE_SHARE = 0.2  # of products with options
NO_PRICE_SHARE = 0.09
DESCRIPTION_SHARE = 0.32
HUMAN_NO_OPTION_SHARE = 0.3  # products without options that get a human request (those with options get 1-3)

PRODUCTS_FILE = "items_shuffle_1000.json"
ATTRIBUTES_FILE = "items_ins_v2_1000.json"
HUMAN_FILE = "items_human_ins.json"
DATA_FILES = (PRODUCTS_FILE, ATTRIBUTES_FILE, HUMAN_FILE)

_SMALL_WORDS = {"and", "for", "with", "of", "in", "to", "on", "the", "a"}


def _title_case(text: str, first_word: bool = True) -> str:
    """Capitalise each word but the small ones (``for``, ``with``, ...), which stay lower-case unless one
    starts the text and ``first_word``."""
    words = text.split()
    return " ".join(
        w if ((i or not first_word) and w in _SMALL_WORDS) or not w[0].isalpha() else w[0].upper() + w[1:]
        for i, w in enumerate(words)
    )


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _article(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _is_plural(ask: str) -> bool:
    head = ask.split(" for ")[0].split()[-1]
    return not ask.startswith(("a ", "an ")) and head.endswith("s") and not head.endswith("ss")


def _price_text(rng: random.Random, kind: Kind, has_options: bool) -> str:
    """``"$12.99"``; for ``RANGE_SHARE`` of products with options a range ``"$3.78 - $11.38"``; for
    ``NO_PRICE_SHARE`` of products ``""`` (the loader reads a missing price as $100.00, as WebShop does)."""
    if rng.random() < NO_PRICE_SHARE:
        return ""
    low = rng.uniform(*kind.price)
    cents = rng.choice((0.99, 0.95, 0.49, 0.97, 0.0, 0.89, 0.36))
    low = max(1.99, math.floor(low) + cents)
    if has_options and rng.random() < RANGE_SHARE:
        high = math.floor(low * rng.uniform(1.2, 2.5)) + 0.99
        return f"${low:.2f} - ${high:.2f}"
    return f"${low:.2f}"


def _size_family(values: tuple[str, ...]) -> str | None:
    """Which longer pool of ``MORE_VALUES`` a kind's size values belong to (None: the kind's own values only)."""
    text = " ".join(values)
    if any(v in ("small", "medium", "large") for v in values):
        return "apparel size"
    if all(v.replace(".", "").isdigit() for v in values):
        return "shoe size"
    for family, words in (
        ("volume", ("fl oz", " ml", "liter")),
        ("weight", ("ounce", "pound")),
        ("count", ("pack", "count", "pieces", "pairs", "bars", "bottle", "stick")),
        ("dimension", ("inch", "feet", "tier")),
    ):
        if any(w in text for w in words):
            return family
    return None


def _color_variant(rng: random.Random, value: str) -> str:
    """A colour value the way real listings write it: ``a1-black``, ``green2``, ``black | white``."""
    form = rng.random()
    if form < 0.4:
        return f"{rng.choice(COLOR_CODES)}-{value}"
    if form < 0.7:
        return f"{value}{rng.randint(2, 9)}"
    other = rng.choice([c for c in MORE_VALUES["color"] if c != value])
    return f"{value} | {other}"


def _group_pool(rng: random.Random, group: str, own: tuple[str, ...]) -> list[str]:
    """The values a product may offer in ``group``: the kind's own first, then a longer shared pool."""
    pool = list(own)
    if group == "color":  # about half the colours in the coded forms real listings use
        pool += [v for v in MORE_VALUES["color"] if v not in pool]
        pool = [_color_variant(rng, v) if rng.random() < COLOR_VARIANT_SHARE else v for v in pool]
    elif group == "size" and (family := _size_family(own)):
        pool += [v for v in MORE_VALUES[family] if v not in pool]
    return pool


def _pick_options(rng: random.Random, kind: Kind) -> dict[str, list[str]]:
    """Option groups and values of one product: none for ``NO_OPTIONS_SHARE`` of products; else ``OPTION_GROUPS``
    of the kind's groups and one more group of its category, each with a long-tailed number of values
    (``VALUES_PER_GROUP``) that the reward's option matcher tells apart, no value in two groups."""
    if rng.random() < NO_OPTIONS_SHARE:
        return {}
    extra_name, extra_values = rng.choice(EXTRA_GROUPS[kind.category])
    candidates = [
        (g, pool, [v for v in pool if v in vs or v.endswith(vs)])
        for g, vs in kind.options.items()
        for pool in [_group_pool(rng, g, vs)]
    ]
    candidates.append((extra_name, list(extra_values), list(extra_values)))
    n_groups = min(len(candidates), rng.choices(range(1, len(OPTION_GROUPS) + 1), weights=OPTION_GROUPS)[0])
    groups = candidates[:n_groups] if rng.random() < 0.8 else rng.sample(candidates, n_groups)
    options: dict[str, list[str]] = {}
    taken: set[str] = set()  # a value names one option of the page: never in two groups
    for group, pool, own in groups:
        wanted = rng.choices(range(1, len(VALUES_PER_GROUP) + 1), weights=VALUES_PER_GROUP)[0]
        chosen: list[str] = []
        # the kind's own values first (its shoppers ask for them), then the wider pool
        for value in rng.sample(own, len(own)) + rng.sample(pool, len(pool)):
            if (
                len(chosen) < wanted
                and value not in chosen
                and value not in taken
                and not any(options_match(value, c) for c in chosen)
            ):
                chosen.append(value)
        taken.update(chosen)
        options[group] = sorted(chosen, key=pool.index)
    return options


def _goal_options(rng: random.Random, options: dict[str, list[str]]) -> dict[str, list[str]]:
    """The option values synthetic goals enumerate: ``GOAL_GROUPS`` weights over naming 0, 1, 2 of the groups,
    a few values of each, at most ``MAX_GOALS_PER_PRODUCT`` combinations."""
    names = list(options)
    k = min(len(names), rng.choices(range(len(GOAL_GROUPS)), weights=GOAL_GROUPS)[0])
    chosen: dict[str, list[str]] = {}
    budget = MAX_GOALS_PER_PRODUCT
    for group in sorted(rng.sample(names, k), key=names.index):
        values = options[group]
        most = max(1, min(len(values), budget, 5))
        n = rng.randint(max(1, most - 1), most)
        chosen[group] = sorted(rng.sample(values, n), key=values.index)
        budget = max(1, budget // n)
    return chosen


def _goal_attributes(rng: random.Random, attributes: list[str]) -> list[str]:
    """``GOAL_ATTRIBUTES`` weights over a goal naming 1, 2 or 3 of the product's attributes."""
    n = rng.choices(range(1, len(GOAL_ATTRIBUTES) + 1), weights=GOAL_ATTRIBUTES)[0]
    return rng.sample(attributes, min(n, len(attributes)))


def _title(
    rng: random.Random, kind: Kind, brand: str, adjs: list[str], feats: list[str], options: dict[str, list[str]]
) -> str:
    """A listing title padded the way real ones are: brand, the product, then selling points (attributes,
    features, category phrases) up to a length drawn from ``TITLE_LENGTHS``, and often one variant's
    options at the end (``..., (Color : Black)``)."""
    target = rng.choice(TITLE_LENGTHS)
    head = rng.choice(kind.heads)
    words = [brand] if rng.random() < 0.85 else []
    if adjs and rng.random() < 0.6 and not set(adjs[0].split()) & set(head.lower().split()):
        words.append(_title_case(adjs[0]))
    words.append(head)
    if kind.extras and rng.random() < 0.6:
        words.append(rng.choice(kind.extras))
    title = " ".join(words)
    pads = [_title_case(a) for a in adjs[1:] + feats] + rng.sample(TITLE_PADS[kind.category], 5)
    pads += [_title_case(p, first_word=False) for p in kind.purposes[:1]]
    rng.shuffle(pads)
    for pad in pads:
        if len(title) >= target:
            break
        if len(title) + len(pad) + 2 <= target + 20:
            title += rng.choice((", ", ", ", " ", " - ")) + pad
    if options and rng.random() < VARIANT_IN_TITLE_SHARE:
        variant = {group: _title_case(rng.choice(values)) for group, values in options.items()}
        if "color" in variant and rng.random() < 0.5:
            title += f" (Color : {variant['color']})"
        else:
            title += "," + ",".join(variant.values())
    return title


_CLOSERS = (
    "Worry-free purchase: reach our support team any time if the {noun} is not what you expected.",
    "Makes a thoughtful gift for friends and family.",
    "Package includes one {noun} and a quick start guide.",
)


def _bullets(rng: random.Random, kind: Kind, adjs: list[str], feats: list[str]) -> list[str]:
    """Feature bullets, each an upper-case lead and a sentence or two; every attribute appears in one."""
    lines = []
    for attr in adjs + feats:
        lead = rng.choice(BULLET_LEADS).format(A=attr.upper())
        body = rng.choice(BULLET_BODIES if attr in adjs else BULLET_FEATURE_BODIES).format(a=attr, noun=kind.noun)
        if rng.random() < 0.5:
            body += " " + rng.choice(BULLET_FILLERS).format(noun=kind.noun)
        lines.append(f"{lead} - {body}")
    rng.shuffle(lines)
    closer = rng.choice(_CLOSERS).format(noun=kind.noun) + " " + rng.choice(BULLET_FILLERS).format(noun=kind.noun)
    return lines + [closer]


def _description(rng: random.Random, kind: Kind, brand: str, adjs: list[str], feats: list[str]) -> str:
    """A few sentences for ``DESCRIPTION_SHARE`` of products; most real products have no description."""
    if rng.random() >= DESCRIPTION_SHARE:
        return ""
    sentences = [
        rng.choice(
            (
                f"Meet the {brand} {kind.noun}.",
                f"{brand} made this {kind.noun} for people who care about the details.",
                f"Looking for a better {kind.noun}? {brand} has you covered.",
            )
        ),
        f"It is {_join(adjs)}" + (f", and it comes with {_join(feats)}." if feats else "."),
    ]
    if kind.purposes:
        sentences.append(f"Ideal {rng.choice(kind.purposes)} or as an everyday pick.")
    sentences.append(
        rng.choice(
            (
                "Order today and see the difference.",
                "Backed by our satisfaction promise.",
                "Thousands of happy customers can't be wrong.",
            )
        )
    )
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
        parts.append(
            rng.choice((f"that {be}", f"which {be}", "that's" if not plural else "that are")) + " " + _join(adjs)
        )
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
    "style": ("in the {v} style", "style {v}", "the {v} one"),
    "pattern name": ("with a {v} pattern", "in {v}", "{v} patterned"),
    "material type": ("made of {v}", "in {v}", "{v} material"),
    "configuration": ("the {v} configuration", "{v} version", "in {v}"),
    "item package quantity": ("quantity {v}", "a pack of {v}", "{v} of them"),
}


def _human_request(
    rng: random.Random, kind: Kind, attrs: list[str], options: dict[str, list[str]]
) -> tuple[str, list[str]]:
    text = _request(rng, kind, attrs)
    picked: list[str] = []
    for group, values in options.items():
        if rng.random() < 0.85:
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
    brand_pool = {c: brands[i * per_category : (i + 1) * per_category] for i, c in enumerate(CATEGORIES)}
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
            products.append(
                {
                    "asin": asin,
                    "name": _title(rng, kind, brand, adjs, feats, options),
                    "brand": brand,
                    "category": kind.category,
                    "query": kind.query,
                    "product_category": kind.path,
                    "pricing": _price_text(rng, kind, bool(options)),
                    "small_description": _bullets(rng, kind, adjs, feats),
                    "full_description": _description(rng, kind, brand, adjs, feats),
                    "customization_options": {
                        g: [{"value": v, "image": None} for v in vs] for g, vs in options.items()
                    },
                }
            )
            attributes = adjs + feats
            goal_attrs = _goal_attributes(rng, attributes)
            instruction = _request(rng, kind, goal_attrs)
            ins[asin] = {
                "attributes": attributes,
                "instruction": instruction,
                "instruction_attributes": goal_attrs,
                "instruction_options": _goal_options(rng, options),
            }
            requests = rng.randint(1, 3) if options else int(rng.random() < HUMAN_NO_OPTION_SHARE)
            for _ in range(requests):
                human_attrs = _goal_attributes(rng, attributes)
                text, picked = _human_request(rng, kind, human_attrs, options)
                human.setdefault(asin, []).append(
                    {
                        "asin": asin,
                        "instruction": text,
                        "instruction_attributes": human_attrs,
                        "instruction_options": picked,
                    }
                )
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
