"""Sokoban's HTTP routes: the family-B episode routes in TextCraft's shapes (`agentgym.episodes.episode_server`,
whose docstring lists them); its levels (`data.py`) are generated on first use, about 20 ms each, then cached.
"""

from __future__ import annotations

from ..episodes import episode_server
from .data import NUM_TASKS

DEFAULT_PORT = 36106
DEFAULT_MAX_ENVS = 4096

build_app, add_arguments, app_from_args = episode_server(
    "Sokoban", "agentgym.sokoban.env:SokobanEnv", NUM_TASKS, DEFAULT_MAX_ENVS
)
