"""ALFWorld's HTTP routes (AgentGym protocol family B, in AgentGym's ALFWorld shapes).

==========================  ========================================  ===============================================
route                       request                                   response
==========================  ========================================  ===============================================
GET  /                                                                ``"ok"``
GET  /health                                                          ``{"open", "max_envs", "reaped",
                                                                      "idle_timeout_s", "in_flight",
                                                                      "oldest_request_s"}``
POST /create                no body (any body is ignored)             ``{"id"}`` (no game yet)
POST /reset                 ``{"id", "game": int, "world_type"}``     ``{"id", "observation", "available_actions",
                                                                      "task_type", "reward", "done"}``
POST /step                  ``{"id", "action"}``                       ``{"observation", "reward", "available_actions",
                                                                      "done"}``
GET  /observation           ``?id=``                                   the current observation (str; 409 before reset)
GET  /available_actions     ``?id=``                                   the actions the engine accepts now ([str])
GET  /list_envs                                                       [int]
POST /close                 ``{"id"}``                                 ``true``; the env's engine is unloaded
==========================  ========================================  ===============================================

``game`` is a generated task id (``0 <= game < 3600``, see `agentgym.alfworld.data`),
or, when the server runs with ``--data-dir``, the index of a real ALFWorld game in
that folder.  ``world_type`` is ``"Text"`` (the default; the only world served).
``done`` is false and ``reward`` 0.0 after reset; reward 1.0 on the step that
completes the task.  Ids and ``game`` must be JSON integers.  Errors: see
``agentgym.server`` (unknown id 404, an id closed for idleness 410, step before reset or after done 409, bad
body or ``game`` 422, env cap 503); an action over 4096 characters is a 422.
"""

from __future__ import annotations

import argparse
from typing import Literal

from fastapi import FastAPI
from pydantic import StrictInt

from ..episodes import EpisodeReset, add_episode_routes
from ..open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry, EpisodeStateError
from ..options import add_server_options, app_factory
from ..registry import get_env_spec
from ..server import create_app
from .env import DEFAULT_MAX_STEPS

DEFAULT_PORT = 36105
DEFAULT_MAX_ENVS = 64  # each holds a copy of Fast Downward's library and its game


class ResetRequest(EpisodeReset):
    """``{"id", "game", "world_type"}``: the game to start (0 when left out); only the text world is served."""

    game: StrictInt = 0
    world_type: Literal["Text"] = "Text"

    @property
    def task_id(self) -> int:
        return self.game


def build_app(
    max_envs: int = DEFAULT_MAX_ENVS,
    data_dir: str | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
) -> FastAPI:
    """The ALFWorld app: generated games, or the real ALFWorld games under ``data_dir``; ``max_steps`` per episode;
    an env idle for ``idle_timeout_s`` is closed and its engine released (0: never)."""
    from .data import GameFolder, generated_game
    from .env import AlfWorldEnv

    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    games = GameFolder(data_dir).__getitem__ if data_dir else generated_game
    spec = get_env_spec("alfworld")
    registry: EnvRegistry[AlfWorldEnv] = EnvRegistry(
        lambda: AlfWorldEnv(games, max_steps), max_envs, spec.id_field, idle_timeout_s, evict_idle_s
    )
    app = create_app("ALFWorld", registry, spec.family)

    def started(env: AlfWorldEnv) -> AlfWorldEnv:
        if env.game is None:
            raise EpisodeStateError("no episode yet: POST /reset first")
        return env

    add_episode_routes(
        app,
        registry,
        reset_model=ResetRequest,
        reset_answer=lambda env, body: {"id": body.id, **env.reset(body.game)},
        observation_answer=lambda env: started(env).observation,
    )

    @app.get("/available_actions")
    def available_actions(id: int) -> list[str]:
        with registry.use(id) as env:
            return list(started(env).available_actions)

    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """ALFWorld's server options."""
    add_server_options(parser, DEFAULT_MAX_ENVS)
    parser.add_argument(
        "--data-dir",
        default=None,
        help="serve the real ALFWorld games under this folder (game.tw-pddl beside traj_data.json) "
        "instead of generated ones",
    )
    parser.add_argument(
        "--max-steps", type=int, default=DEFAULT_MAX_STEPS, help="actions per episode (default %(default)s)"
    )


app_from_args = app_factory(build_app)
