"""BM25 product search (``bm25s``), with the index cached on disk.

Each product is indexed as its title, description, bullet points and option
values.  Text is lower-cased, split into words of two or more letters or
digits, stripped of ``bm25s``'s English stop words and reduced by a light
suffix stemmer (plural and ``-ing``/``-ed`` endings), the same way for
products and queries.  ``search(query)`` returns up to ``k`` product
positions with a positive score, best first (ties by catalogue order).

The index is built once per product file and kept under
``<cache root>/webshop/index-v<INDEX_VERSION>-<hash of the product file>/``;
later starts load it in milliseconds.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from .data import Product

log = logging.getLogger("agentgym.webshop.search")

INDEX_VERSION = 1
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = frozenset(STOPWORDS_EN)


def stem(word: str) -> str:
    """A light English suffix stemmer: ``extensions`` -> ``extension``, ``charging`` -> ``charg``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    return [stem(w) for w in _TOKEN.findall(text.lower()) if w not in _STOPWORDS]


def product_document(product: Product) -> str:
    options = " ".join(v for values in product.options.values() for v in values)
    return " ".join((product.title, product.description, " ".join(product.bullets), options))


class SearchEngine:
    """BM25 over a fixed product list."""

    def __init__(self, products: Sequence[Product], products_hash: str, cache_dir: Path | None) -> None:
        index_dir = cache_dir / "webshop" / f"index-v{INDEX_VERSION}-{products_hash}" if cache_dir else None
        if index_dir is not None and (index_dir / "params.index.json").is_file():
            self._bm25 = bm25s.BM25.load(str(index_dir), show_progress=False)
            log.info("search index loaded", extra={"path": str(index_dir)})
            return
        self._bm25 = bm25s.BM25()
        self._bm25.index([tokenize(product_document(p)) for p in products], show_progress=False)
        if index_dir is not None:
            self._save(index_dir)

    def _save(self, index_dir: Path) -> None:
        index_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".index-", dir=index_dir.parent)
        try:
            self._bm25.save(tmp, show_progress=False)
            try:
                os.rename(tmp, index_dir)
            except OSError:  # another process saved the same index first
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("search index built", extra={"path": str(index_dir)})

    def search(self, query: str, k: int = 50) -> list[int]:
        ids = self._bm25.get_tokens_ids(tokenize(query))
        if not ids:
            return []
        scores = np.asarray(self._bm25.get_scores_from_ids(ids))
        hits = np.flatnonzero(scores > 0)
        order = hits[np.lexsort((hits, -scores[hits]))][:k]
        return [int(i) for i in order]
