"""SciWorld's oracle: the simulator's own gold path for a task."""

from __future__ import annotations

from .env import SciWorldEnv


def oracle(env: SciWorldEnv, data_idx: int) -> list[str]:
    """Reset ``env`` on ``data_idx`` with its gold path planned and answer that path (the actions to play next)."""
    env.reset(data_idx, gold_path=True)
    return env.gold_path()
