"""Trajectory records as JSON lines: one file per rollout step, one line per trajectory.

Layout: ``<output_dir>/rollouts/step_<global_step:06d>.jsonl``.  A record is a
plain dict (see ``openmanus_rl.agent.output.trajectory_record``): ids of the
episode, its status, rewards and breakdown, the readable turns, the prompt
text and the response ``segments`` (text, token count and loss mask of each
model / observation / appended end-of-turn piece).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable


def step_path(output_dir: str | Path, global_step: int, suffix: str = ".jsonl") -> Path:
    return Path(output_dir) / "rollouts" / f"step_{global_step:06d}{suffix}"


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
