"""Sokoban's HTTP routes (AgentGym protocol family B, in TextCraft's shapes).

==========================  ===========================================  =============================================
route                       request                                      response
==========================  ===========================================  =============================================
GET  /                                                                   ``"ok"``
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
see ``agentgym.server`` (unknown id 404, step after done 409, bad body 422,
env cap 503); an action over 4096 characters is a 422.
"""

from __future__ import annotations

import argparse
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, StrictInt

from ..server import EnvRegistry, Family, create_app
from .data import NUM_TASKS
from .env import SokobanEnv

DEFAULT_PORT = 36102
DEFAULT_MAX_ENVS = 4096
MAX_ACTION_CHARS = 4096


class ResetRequest(BaseModel):
    id: StrictInt
    data_idx: StrictInt = 0


class StepRequest(BaseModel):
    id: StrictInt
    action: str = Field(max_length=MAX_ACTION_CHARS)


def _episode(env_id: int, observation: str) -> dict[str, Any]:
    return {"id": env_id, "observation": observation, "done": False, "reward": 0.0}


def build_app(max_envs: int = DEFAULT_MAX_ENVS) -> FastAPI:
    """The Sokoban app."""
    registry: EnvRegistry[SokobanEnv] = EnvRegistry(SokobanEnv, max_envs, "id")
    app = create_app("Sokoban", registry, Family.B)
    # family B's /create also starts an episode here: replace the base route
    app.router.routes[:] = [r for r in app.router.routes if not (isinstance(r, APIRoute) and r.path == "/create")]

    @app.post("/create")
    def create() -> dict[str, Any]:
        env_id = registry.create()
        with registry.use(env_id) as env:
            return _episode(env_id, env.reset(env_id % NUM_TASKS))

    @app.post("/reset")
    def reset(body: ResetRequest) -> dict[str, Any]:
        with registry.use(body.id) as env:
            return _episode(body.id, env.reset(body.data_idx))

    @app.post("/step")
    def step(body: StepRequest) -> dict[str, Any]:
        with registry.use(body.id) as env:
            result = env.step(body.action)
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    @app.get("/observation")
    def observation(id: int) -> str:
        with registry.use(id) as env:
            return env.observation

    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sokoban's server options."""
    parser.add_argument("--max-envs", type=int, default=DEFAULT_MAX_ENVS,
                        help="most envs open at once; past it /create answers 503 (default %(default)s)")


def app_from_args(args: argparse.Namespace) -> FastAPI:
    return build_app(args.max_envs)
