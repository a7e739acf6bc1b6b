"""FrozenLake's HTTP routes: the family-B episode routes in TextCraft's shapes (`agentgym.episodes.episode_server`,
whose docstring lists them); its tasks are the maps of `data.py`.
"""

from __future__ import annotations

from ..episodes import episode_server
from .data import NUM_TASKS

DEFAULT_PORT = 36101
DEFAULT_MAX_ENVS = 4096

build_app, add_arguments, app_from_args = episode_server(
    "FrozenLake", "agentgym.frozenlake.env:FrozenLakeEnv", NUM_TASKS, DEFAULT_MAX_ENVS
)
