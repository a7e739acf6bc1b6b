"""Sokoban's HTTP routes (AgentGym protocol family B, in TextCraft's shapes).

==========================  ===========================================  =============================================
route                       request                                      response
==========================  ===========================================  =============================================
GET  /                                                                   ``"ok"``
GET  /health                                                             ``{"open", "max_envs", "reaped",
                                                                         "idle_timeout_s", "in_flight",
                                                                         "oldest_request_s"}``
POST /create                no body (any body is ignored)                ``{"id", "observation", "done", "reward"}``
POST /reset                 ``{"id", "data_idx": int}`` (default 0)       ``{"id", "observation", "done", "reward"}``
POST /step                  ``{"id", "action"}``                          ``{"observation", "reward", "done"}``
GET  /observation           ``?id=``                                      the current observation (str)
GET  /list_envs                                                          [int]
POST /close                 ``{"id"}``                                    ``true``
==========================  ===========================================  =============================================

``/create`` starts the new env on task ``id % 1300``, as TextCraft's does (a
level is generated on first use, about 20 ms, then cached).  ``done`` is false
and ``reward`` 0.0 after create and reset.  Ids and ``data_idx`` must be JSON
integers (not strings or booleans); ``data_idx`` must be a task id.  Errors:
see ``agentgym.server`` (unknown id 404, an id closed for idleness 410, step after done 409, bad body 422,
env cap 503); an action over 4096 characters is a 422.
"""

from __future__ import annotations

import argparse

from fastapi import FastAPI

from ..episodes import add_episode_routes
from ..options import add_server_options, app_factory
from ..server import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry, Family, create_app
from .data import NUM_TASKS
from .env import SokobanEnv

DEFAULT_PORT = 36106
DEFAULT_MAX_ENVS = 4096


def build_app(
    max_envs: int = DEFAULT_MAX_ENVS,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
) -> FastAPI:
    """The Sokoban app; envs idle for ``idle_timeout_s`` are closed (0: never)."""
    registry: EnvRegistry[SokobanEnv] = EnvRegistry(SokobanEnv, max_envs, "id", idle_timeout_s, evict_idle_s)
    app = create_app("Sokoban", registry, Family.B)
    add_episode_routes(app, registry, NUM_TASKS)
    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sokoban's server options."""
    add_server_options(parser, DEFAULT_MAX_ENVS)


app_from_args = app_factory(build_app)
