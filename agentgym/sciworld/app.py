"""SciWorld's HTTP routes (AgentGym protocol family B).

==========================  ======================  ==================================================================
route                       request                 response
==========================  ======================  ==================================================================
POST /create                no body                 ``{"id"}`` (starts the env's JVM, about 2 s)
POST /reset                 ``{"id", "data_idx"}``  ``{"task_name", "var_num", "task_description", "observation",
                                                    "reward", "score", "deleted", "done"}``
POST /step                  ``{"id", "action"}``    ``{"observation", "reward", "score", "done"}``
GET  /observation           ``?id=``                ``{"observation", "reward", "score", "done", "deleted"}``
GET  /action_hint           ``?id=``                the valid actions now ([str]; about 140 ms)
GET  /task_description      ``?id=``                the task (str)
==========================  ======================  ==================================================================

Every server also has ``GET /``, ``GET /health``, ``GET /list_envs`` and ``POST /close`` (`agentgym.server`);
here ``/close`` answers once the env's JVM has exited.

``score`` is the task progress 0..100 (100: done); ``reward`` the change of
score at this step (0 on reset and on ``/observation``).  Errors: see
``agentgym.server`` (unknown id 404, an id closed for idleness 410, step before reset or after done 409, bad
body or ``data_idx`` 422, env cap 503); an action over 4096 characters is a 422.
"""

from __future__ import annotations

import argparse
from typing import Any

from fastapi import FastAPI

from ..episodes import add_episode_routes
from ..open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry
from ..options import add_server_options, app_factory
from ..registry import get_env_spec
from ..server import create_app
from .env import DEFAULT_MAX_STEPS, SIMPLIFICATIONS, SciWorldEnv

DEFAULT_PORT = 36104
DEFAULT_MAX_ENVS = 16  # one JVM each


def build_app(
    max_envs: int = DEFAULT_MAX_ENVS,
    simplifications: str = "",
    max_steps: int = DEFAULT_MAX_STEPS,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
) -> FastAPI:
    """The SciWorld app; ``simplifications`` are ScienceWorld's (e.g. ``easy``), ``max_steps`` the episode cap;
    an env idle for ``idle_timeout_s`` is closed and its JVM ended (0: never)."""
    unknown = [s for s in simplifications.split(",") if s and s not in SIMPLIFICATIONS]
    if unknown:
        raise ValueError(f"unknown ScienceWorld simplifications {unknown}; known: {list(SIMPLIFICATIONS)}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    spec = get_env_spec("sciworld")
    registry: EnvRegistry[SciWorldEnv] = EnvRegistry(
        lambda: SciWorldEnv(simplifications, max_steps), max_envs, spec.id_field, idle_timeout_s, evict_idle_s
    )
    app = create_app("SciWorld", registry, spec.family)

    def observation_answer(env: SciWorldEnv) -> dict[str, Any]:
        return {"observation": env.observation, "reward": 0.0, "score": env.score, "done": env.done, "deleted": False}

    add_episode_routes(
        app, registry, reset_answer=lambda env, body: env.reset(body.data_idx), observation_answer=observation_answer
    )

    @app.get("/action_hint")
    def action_hint(id: int) -> list[str]:
        with registry.use(id) as env:
            return env.action_hint()

    @app.get("/task_description")
    def task_description(id: int) -> str:
        with registry.use(id) as env:
            return env.task_description()

    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SciWorld's server options."""
    add_server_options(parser, DEFAULT_MAX_ENVS, "envs (JVMs)")
    parser.add_argument(
        "--simplifications", default="", help="ScienceWorld simplifications, comma-separated (e.g. easy); default none"
    )
    parser.add_argument(
        "--max-steps", type=int, default=DEFAULT_MAX_STEPS, help="actions per episode (default %(default)s)"
    )


app_from_args = app_factory(build_app)
