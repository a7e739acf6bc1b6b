"""Word lists the catalogue generator draws from, kept as data in ``vocab.json``: one `Kind` per product type.

Each kind belongs to one of WebShop's five categories and carries what the
generator needs to write a product page and a shopper's request: the search
query that finds it, its category path, title heads, the noun phrases a shopper
uses for it, adjective-like and feature-like attributes, option groups with
their possible values, a price band and a few title and purpose phrases.
The other lists (brand syllables, title and bullet phrases, extra option
groups) are ``vocab.json``'s other keys, under their names in lower case.
All text there was written for this project.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Kind:
    category: str  # beauty | electronics | fashion | garden (home and furniture) | grocery
    query: str  # the search query this type of product is filed under
    path: str  # category path, "›"-separated as in WebShop's data
    noun: str  # singular noun for sentences ("this <noun> ...")
    heads: tuple[str, ...]  # title heads
    asks: tuple[str, ...]  # how a shopper names it ("a hairpiece", "hair extensions")
    adjs: tuple[str, ...]  # adjective-like attributes ("that is <adj>")
    feats: tuple[str, ...]  # feature-like attributes ("with <feat>")
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    price: tuple[float, float] = (10.0, 50.0)
    extras: tuple[str, ...] = ()  # title tails
    purposes: tuple[str, ...] = ()  # "for ..." phrases


def _frozen(value: Any) -> Any:
    """JSON's lists as tuples, at every depth (dicts stay dicts)."""
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, dict):
        return {key: _frozen(item) for key, item in value.items()}
    return value


_DATA = _frozen(json.loads(Path(__file__).with_name("vocab.json").read_text(encoding="utf-8")))

KINDS: tuple[Kind, ...] = tuple(Kind(**kind) for kind in _DATA["kinds"])
CATEGORIES: tuple[str, ...] = _DATA["categories"]  # WebShop's own names
BRAND_HEADS: tuple[str, ...] = _DATA["brand_heads"]
BRAND_TAILS: tuple[str, ...] = _DATA["brand_tails"]
LEADS: tuple[str, ...] = _DATA["leads"]
MORE_VALUES: dict[str, tuple[str, ...]] = _DATA["more_values"]
COLOR_CODES: tuple[str, ...] = _DATA["color_codes"]
EXTRA_GROUPS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = _DATA["extra_groups"]
TITLE_PADS: dict[str, tuple[str, ...]] = _DATA["title_pads"]
BULLET_LEADS: tuple[str, ...] = _DATA["bullet_leads"]
BULLET_BODIES: tuple[str, ...] = _DATA["bullet_bodies"]  # for adjective-like attributes ("is {a}")
BULLET_FEATURE_BODIES: tuple[str, ...] = _DATA["bullet_feature_bodies"]  # for feature-like attributes ("with {a}")
BULLET_FILLERS: tuple[str, ...] = _DATA["bullet_fillers"]
