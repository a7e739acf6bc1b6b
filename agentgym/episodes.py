"""Family-B episode routes in TextCraft's shapes (TextCraft, FrozenLake, Sokoban, LMRL-Gym's Maze and Wordle).

`add_episode_routes` adds ``/reset``, ``/step`` and ``/observation`` over an
`EnvRegistry` of envs with ``reset(task_id) -> str``, ``step(action) ->
StepResult`` and ``observation``.  ``/reset`` reads its body as ``reset_model``
(by default `ResetRequest`, ``{"id", "data_idx"}``) and starts the body's
`EpisodeReset.task_id`.  With ``num_tasks``, ``/create`` (no body) is replaced by
one that also starts the new env on task ``id % num_tasks``; without it the
base ``/create`` stays (a caller that serves its own uses `drop_route` first).
An env whose upstream answers in other shapes passes ``reset_answer(env, body)``
and ``observation_answer(env)`` (BabyAI, SciWorld, ALFWorld).

`episode_server` is the whole server module of an env that needs nothing more:
``build_app, add_arguments, app_from_args = episode_server(...)``.  Its routes:

==========================  ===========================================  =============================================
route                       request                                      response
==========================  ===========================================  =============================================
POST /create                no body (any body is ignored)                ``{"id", "observation", "done", "reward"}``
POST /reset                 ``{"id", "data_idx": int}`` (default 0)       ``{"id", "observation", "done", "reward"}``
POST /step                  ``{"id", "action"}``                          ``{"observation", "reward", "done"}``
GET  /observation           ``?id=``                                      the current observation (str)
==========================  ===========================================  =============================================

Every server also has ``GET /``, ``GET /health``, ``GET /list_envs`` and ``POST /close`` (`agentgym.server`).

``/create`` starts the new env on task ``id % num_tasks``, as TextCraft's does.  ``done`` is false and ``reward``
0.0 after create and reset.  Ids and ``data_idx`` must be JSON integers (not strings or booleans); ``data_idx``
must be a task id.  Errors: see ``agentgym.server`` (unknown id 404, an id closed for idleness 410, step after done
409, bad body 422, env cap 503); an action over 4096 characters is a 422.
"""

from __future__ import annotations

import argparse
from abc import abstractmethod
from typing import Any, Callable

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, StrictInt

from .open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry
from .options import add_server_options, app_factory
from .server import create_app
from .spec import load_object

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
    app: FastAPI,
    registry: EnvRegistry,
    num_tasks: int | None = None,
    reset_model: type[EpisodeReset] = ResetRequest,
    reset_answer: Callable[[Any, EpisodeReset], Any] | None = None,
    observation_answer: Callable[[Any], Any] | None = None,
) -> None:
    """Add the episode routes to ``app`` (see the module docstring)."""
    if num_tasks is not None:
        drop_route(app, "/create")

        @app.post("/create")
        def create() -> dict[str, Any]:
            env_id = registry.create()
            with registry.use(env_id) as env:
                return episode(env_id, env.reset(env_id % num_tasks))

    def reset(body: EpisodeReset) -> Any:
        with registry.use(body.id) as env:
            if reset_answer is not None:
                return reset_answer(env, body)
            return episode(body.id, env.reset(body.task_id))

    reset.__annotations__["body"] = reset_model  # FastAPI reads the body's model from the annotation
    app.post("/reset")(reset)

    @app.post("/step")
    def step(body: StepRequest) -> dict[str, Any]:
        with registry.use(body.id) as env:
            result = env.step(body.action)
        return result.answer()

    @app.get("/observation")
    def observation(id: int) -> Any:
        with registry.use(id) as env:
            return env.observation if observation_answer is None else observation_answer(env)


def episode_server(
    title: str, env_class: str, num_tasks: int, default_max_envs: int
) -> tuple[Callable[..., FastAPI], Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], FastAPI]]:
    """``(build_app, add_arguments, app_from_args)`` of a family-B server whose envs are ``env_class()``
    (``package.module:Class``, imported when the app is built, so that importing the server module stays cheap)
    on tasks ``0 .. num_tasks - 1`` with the episode routes, and the common server options
    (`agentgym.options`)."""

    def build_app(
        max_envs: int = default_max_envs,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
    ) -> FastAPI:
        registry = EnvRegistry(load_object(env_class), max_envs, "id", idle_timeout_s, evict_idle_s)
        app = create_app(title, registry, "B")  # the episode routes' shapes are family B's
        add_episode_routes(app, registry, num_tasks)
        return app

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_server_options(parser, default_max_envs)

    build_app.__doc__ = f"The {title} app; envs idle for ``idle_timeout_s`` are closed (0: never)."
    add_arguments.__doc__ = f"{title}'s server options."
    return build_app, add_arguments, app_factory(build_app)
