"""Family-B episode routes in TextCraft's shapes (TextCraft, FrozenLake, Sokoban, LMRL-Gym's Maze and Wordle).

`add_episode_routes` adds ``/reset``, ``/step`` and ``/observation`` over an
`EnvRegistry` of envs with ``reset(task_id) -> str``, ``step(action) ->
StepResult`` and ``observation``.  ``/reset`` reads its body as ``reset_model``
(by default `ResetRequest`, ``{"id", "data_idx"}``) and starts the body's
`EpisodeReset.task_id`.  With ``num_tasks``, ``/create`` (no body) is replaced by
one that also starts the new env on task ``id % num_tasks``; without it the
base ``/create`` stays (a caller that serves its own uses `drop_route` first).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, StrictInt

from .server import EnvRegistry

MAX_ACTION_CHARS = 4096


class EpisodeReset(BaseModel):
    """A ``/reset`` body: the env ``id`` and, in a field each subclass names, the task to start (`task_id`)."""

    id: StrictInt

    @property
    @abstractmethod
    def task_id(self) -> int:
        """The task the env starts."""


class ResetRequest(EpisodeReset):
    """``{"id", "data_idx"}``; ``data_idx`` is 0 when left out."""

    data_idx: StrictInt = 0

    @property
    def task_id(self) -> int:
        return self.data_idx


class StepRequest(BaseModel):
    id: StrictInt
    action: str = Field(max_length=MAX_ACTION_CHARS)


def episode(env_id: int, observation: str) -> dict[str, Any]:
    """The answer to ``/create`` and ``/reset``: a fresh episode, not done, reward 0."""
    return {"id": env_id, "observation": observation, "done": False, "reward": 0.0}


def drop_route(app: FastAPI, path: str) -> None:
    """Remove ``app``'s routes at ``path``, so that a route added there afterwards is the one that answers."""
    app.router.routes[:] = [r for r in app.router.routes if not (isinstance(r, APIRoute) and r.path == path)]


def add_episode_routes(
    app: FastAPI, registry: EnvRegistry, num_tasks: int | None = None, reset_model: type[EpisodeReset] = ResetRequest
) -> None:
    """Add the episode routes to ``app`` (see the module docstring)."""
    if num_tasks is not None:
        drop_route(app, "/create")

        @app.post("/create")
        def create() -> dict[str, Any]:
            env_id = registry.create()
            with registry.use(env_id) as env:
                return episode(env_id, env.reset(env_id % num_tasks))

    def reset(body: EpisodeReset) -> dict[str, Any]:
        with registry.use(body.id) as env:
            return episode(body.id, env.reset(body.task_id))

    reset.__annotations__["body"] = reset_model  # FastAPI reads the body's model from the annotation
    app.post("/reset")(reset)

    @app.post("/step")
    def step(body: StepRequest) -> dict[str, Any]:
        with registry.use(body.id) as env:
            result = env.step(body.action)
        return result.answer()

    @app.get("/observation")
    def observation(id: int) -> str:
        with registry.use(id) as env:
            return env.observation
