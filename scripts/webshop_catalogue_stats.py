"""Statistics of WebShop catalogues side by side: ours and any folder of WebShop-format files.

    python scripts/webshop_catalogue_stats.py                                  # the generated catalogue alone
    python scripts/webshop_catalogue_stats.py --data_dir /path/to/webshop/data # ours beside another catalogue
    python scripts/webshop_catalogue_stats.py --data_dir A --data_dir B --json out.json

Per catalogue (columns), from its files as WebShop's loader reads them:

* products: title length in characters (mean, 10th / 50th / 90th percentile),
  share of products with options, option groups per product, values per
  group (mean, median, max), share of option values with digits, ``|``,
  brackets or hyphens ("odd" values such as ``y1-black`` or ``8 ounce (pack of 2)``),
  share of prices given as a range and share with no price;
* goals, from the human requests (``items_human_ins.json``) and, where
  present, the synthetic goals the env serves: attributes and options per goal;
* search (only for a catalogue of at least ``MIN_SEARCH_PRODUCTS``
  products, so that the index is comparable): for the first ``--goals`` test
  goals, the results of the expert's search, how many product categories the
  first page (10 results) mixes, and how often the target is on it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from agentgym.cache import cache_root
from agentgym.webshop.catalogue import ATTRIBUTES_FILE, HUMAN_FILE, PRODUCTS_FILE
from agentgym.webshop.data import load_shop, parse_products
from agentgym.webshop.expert import parse_instruction, search_keywords
from agentgym.webshop.search import SearchEngine

MIN_SEARCH_PRODUCTS = 500
FIRST_PAGE = 10


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _odd(value: str) -> bool:
    return any(c.isdigit() for c in value) or any(c in value for c in "|()-")


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def product_stats(data_dir: Path) -> dict[str, float]:
    """Title, option and price statistics of the products in ``data_dir`` (parsed as the env parses them)."""
    raw = json.loads((data_dir / PRODUCTS_FILE).read_text(encoding="utf-8"))
    products = parse_products(raw, {})
    titles = [len(p.title) for p in products]
    groups = [len(p.options) for p in products]
    per_group = [len(values) for p in products for values in p.options.values()]
    values = [v for p in products for vs in p.options.values() for v in vs]
    prices = [str(r.get("pricing") or "") for r in raw]
    return {
        "products": len(products),
        "title chars, mean": _mean(titles),
        "title chars, p10": _percentile(titles, 0.1),
        "title chars, median": _percentile(titles, 0.5),
        "title chars, p90": _percentile(titles, 0.9),
        "share with options": _mean([g > 0 for g in groups]),
        "option groups per product": _mean(groups),
        "values per group, mean": _mean(per_group),
        "values per group, median": _percentile(per_group, 0.5) if per_group else float("nan"),
        "values per group, max": max(per_group, default=0),
        "share of odd option values": _mean([_odd(v) for v in values]),
        "share of price ranges": _mean([p.count("$") >= 2 for p in prices]),
        "share without price": _mean([not p.strip() for p in prices]),
    }


def goal_stats(data_dir: Path) -> dict[str, float]:
    """Words, attributes and options per goal: human requests (the raw file) and, where the synthetic goal file
    exists, the synthetic goals the env serves (their words without the option and price clauses)."""
    out: dict[str, float] = {}
    if (data_dir / HUMAN_FILE).is_file():
        human = json.loads((data_dir / HUMAN_FILE).read_text(encoding="utf-8"))
        requests = [r for rs in human.values() for r in rs if r.get("instruction_attributes")]
        out["human goals"] = len(requests)
        out["human: words per goal"] = _mean([len(r["instruction"].split()) for r in requests])
        out["human: attributes per goal"] = _mean([len(r["instruction_attributes"]) for r in requests])
        out["human: options per goal"] = _mean([len(r.get("instruction_options") or []) for r in requests])
        out["human: share without options"] = _mean([not r.get("instruction_options") for r in requests])
    if (data_dir / ATTRIBUTES_FILE).is_file():
        goals = load_shop(data_dir, goal_source="synthetic").goals
        out["synthetic goals"] = len(goals)
        out["synthetic: words per goal"] = _mean([len(parse_instruction(g.instruction).request.split()) for g in goals])
        out["synthetic: attributes per goal"] = _mean([len(g.attributes) for g in goals])
        out["synthetic: options per goal"] = _mean([len(g.options) for g in goals])
        out["synthetic: share without options"] = _mean([not g.options for g in goals])
    return out


def search_stats(data_dir: Path, n_goals: int) -> dict[str, float]:
    """What the expert's first search shows for the first ``n_goals`` test goals."""
    raw = json.loads((data_dir / PRODUCTS_FILE).read_text(encoding="utf-8"))
    if len(raw) < MIN_SEARCH_PRODUCTS:
        return {}
    shop = load_shop(data_dir, goal_source="synthetic" if (data_dir / ATTRIBUTES_FILE).is_file() else "human")
    engine = SearchEngine(shop.products, shop.products_hash, cache_root())
    results, categories, found = [], [], []
    for goal in shop.goals[:n_goals]:
        hits = engine.search(search_keywords(parse_instruction(goal.instruction)), 50)
        first = [shop.products[i] for i in hits[:FIRST_PAGE]]
        results.append(len(hits))
        categories.append(len({p.category for p in first}))
        found.append(any(p.asin == goal.asin for p in first))
    return {
        "search: results": _mean(results),
        "search: categories on page 1": _mean(categories),
        "search: target on page 1": _mean(found),
    }


def catalogue_stats(data_dir: Path, n_goals: int) -> dict[str, float]:
    return {**product_stats(data_dir), **goal_stats(data_dir), **search_stats(data_dir, n_goals)}


def table(columns: dict[str, dict[str, float]]) -> str:
    """A Markdown table: one row per statistic, one column per catalogue."""
    names = list(columns)
    keys = list(dict.fromkeys(k for stats in columns.values() for k in stats))
    lines = ["| statistic | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for key in keys:
        cells = []
        for name in names:
            value = columns[name].get(key)
            cells.append("" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value))
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", action="append", default=[], help="a folder of WebShop-format files (repeatable)")
    parser.add_argument("--goals", type=int, default=200, help="test goals searched per catalogue")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    dirs = {"generated": load_shop().data_dir}
    for given in args.data_dir:
        path = Path(given).expanduser().resolve()
        if not (path / PRODUCTS_FILE).is_file():
            print(f"{path} has no {PRODUCTS_FILE}", file=sys.stderr)
            return 2
        dirs[path.name] = path
    columns: dict[str, dict[str, Any]] = {name: catalogue_stats(path, args.goals) for name, path in dirs.items()}
    print(table(columns))
    if args.json:
        Path(args.json).write_text(json.dumps(columns, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
