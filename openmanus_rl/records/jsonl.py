"""Trajectory records as JSON lines: one file per rollout step, one line per trajectory.

Layout: ``<output_dir>/rollouts/step_<global_step:06d>.jsonl``.  A record is a
plain dict (see ``openmanus_rl.agent.output.trajectory_record``): ids of the
episode, its status, rewards and breakdown, the readable turns, the prompt
text and the response ``segments`` (text, token count and loss mask of each
model / observation / appended end-of-turn piece).
"""

from __future__ import annotations

from pathlib import Path

from verl.utils.jsonl import read_jsonl, write_jsonl

__all__ = ["read_jsonl", "step_path", "write_jsonl"]


def step_path(output_dir: str | Path, global_step: int, suffix: str = ".jsonl") -> Path:
    return Path(output_dir) / "rollouts" / f"step_{global_step:06d}{suffix}"
