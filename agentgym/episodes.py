"""Family-B routes for envs whose ``/create`` also starts an episode (TextCraft, FrozenLake, Sokoban).

`add_episode_routes` replaces the base ``/create`` and adds ``/reset``, ``/step`` and
``/observation`` over an `EnvRegistry` of envs with ``reset(task_id) -> str``,
``step(action)`` (a result with ``observation``, ``reward``, ``done``) and ``observation``.
With ``num_tasks``, ``/create`` (no body) starts the new env on task ``id % num_tasks``;
without it the caller adds its own ``/create``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, StrictInt

from .server import EnvRegistry

MAX_ACTION_CHARS = 4096


class ResetRequest(BaseModel):
    id: StrictInt
    data_idx: StrictInt = 0


class StepRequest(BaseModel):
    id: StrictInt
    action: str = Field(max_length=MAX_ACTION_CHARS)


def episode(env_id: int, observation: str) -> dict[str, Any]:
    """The answer to ``/create`` and ``/reset``: a fresh episode, not done, reward 0."""
    return {"id": env_id, "observation": observation, "done": False, "reward": 0.0}


def add_episode_routes(app: FastAPI, registry: EnvRegistry, num_tasks: int | None = None) -> None:
    app.router.routes[:] = [r for r in app.router.routes if not (isinstance(r, APIRoute) and r.path == "/create")]

    if num_tasks is not None:
        @app.post("/create")
        def create() -> dict[str, Any]:
            env_id = registry.create()
            with registry.use(env_id) as env:
                return episode(env_id, env.reset(env_id % num_tasks))

    @app.post("/reset")
    def reset(body: ResetRequest) -> dict[str, Any]:
        with registry.use(body.id) as env:
            return episode(body.id, env.reset(body.data_idx))

    @app.post("/step")
    def step(body: StepRequest) -> dict[str, Any]:
        with registry.use(body.id) as env:
            result = env.step(body.action)
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    @app.get("/observation")
    def observation(id: int) -> str:
        with registry.use(id) as env:
            return env.observation
