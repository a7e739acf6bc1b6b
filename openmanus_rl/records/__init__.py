"""Trajectory records: JSONL per rollout step and a static HTML viewer."""

from .jsonl import read_jsonl, step_path, write_jsonl
from .viewer import render_html, write_viewer

__all__ = ["read_jsonl", "render_html", "step_path", "write_jsonl", "write_viewer"]
