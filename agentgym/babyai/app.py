"""BabyAI's HTTP routes (AgentGym protocol family B, in AgentGym's BabyAI shapes).

==========================  ===========================================  =============================================
route                       request                                      response
==========================  ===========================================  =============================================
POST /create                no body (any body is ignored)                ``{"id"}``: an env with no episode yet
POST /reset                 ``{"id", "data_idx": int}`` (default 0)       ``{"observation", "reward", "score",
                                                                         "deleted": false, "done"}``
POST /step                  ``{"id", "action"}``                          ``{"observation", "reward", "score", "done"}``
GET  /observation           ``?id=``                                      ``{"observation", "reward", "score", "done",
                                                                         "deleted": false}``
==========================  ===========================================  =============================================

Every server also has ``GET /``, ``GET /health``, ``GET /list_envs`` and ``POST /close`` (`agentgym.server`).

``reward`` is the last action's reward (0.0 after a reset), ``score`` the
episode's total so far; both are minigrid's ``1 - 0.9 * steps / max_steps`` on
the action that completes the mission and 0 otherwise (`agentgym.babyai.env`).
``deleted`` is always false: a closed env is gone (its id answers 404).  Ids
and ``data_idx`` must be JSON integers (not strings or booleans); ``data_idx``
must be a task id (0 <= data_idx < 4000).  Errors: see ``agentgym.server``
(unknown id 404, an id closed for idleness 410, step or observation before a reset and step after done 409,
bad body 422, env cap 503); an action over 4096 characters is a 422.
"""

from __future__ import annotations

import argparse
from typing import Any

from fastapi import FastAPI

from ..episodes import ResetRequest, add_episode_routes
from ..open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry, EpisodeStateError
from ..options import add_server_options, app_factory
from ..registry import get_env_spec
from ..server import create_app

DEFAULT_PORT = 36102
DEFAULT_MAX_ENVS = 4096


def build_app(
    max_envs: int = DEFAULT_MAX_ENVS,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
) -> FastAPI:
    """The BabyAI app (minigrid is imported here, so that importing this module stays cheap); envs idle for
    ``idle_timeout_s`` are closed (0: never)."""
    from .env import BabyAIEnv

    spec = get_env_spec("babyai")
    registry: EnvRegistry[BabyAIEnv] = EnvRegistry(BabyAIEnv, max_envs, spec.id_field, idle_timeout_s, evict_idle_s)
    app = create_app("BabyAI", registry, spec.family)

    def reset_answer(env: BabyAIEnv, body: ResetRequest) -> dict[str, Any]:
        return answer(env, env.reset(body.data_idx))

    def observation_answer(env: BabyAIEnv) -> dict[str, Any]:
        if env.gym is None:
            raise EpisodeStateError("no episode yet: POST /reset first")
        return answer(env, env.observation)

    add_episode_routes(app, registry, reset_answer=reset_answer, observation_answer=observation_answer)
    return app


def answer(env: Any, observation: str) -> dict[str, Any]:
    """The answer to ``/reset`` and ``/observation`` in AgentGym's BabyAI shape."""
    return {"observation": observation, "reward": env.reward, "score": env.score, "done": env.done, "deleted": False}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """BabyAI's server options."""
    add_server_options(parser, DEFAULT_MAX_ENVS)


app_from_args = app_factory(build_app)
