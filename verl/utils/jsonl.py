"""Text and JSON lines on disk, written atomically: a reader finds a file whole or as it was, never a part."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable


def write_text_atomically(path: str | Path, text: str) -> None:
    """``path`` holds ``text`` whole or what it held before, never a part: written beside it, then renamed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write ``records`` (one JSON object per line) atomically to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)
    return path


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
