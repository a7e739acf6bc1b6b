"""TextCraft's HTTP routes (AgentGym protocol family B).

==========================  ===========================================  =============================================
route                       request                                      response
==========================  ===========================================  =============================================
POST /create                ``{"commands": str|null, "goal": str|null}``  ``{"id", "observation", "done", "reward"}``
                            or no body
POST /reset                 ``{"id", "data_idx": int}`` (default 0)       ``{"id", "observation", "done", "reward"}``
POST /step                  ``{"id", "action"}``                          ``{"observation", "reward", "done"}``
GET  /observation           ``?id=``                                      the current observation (str)
==========================  ===========================================  =============================================

Every server also has ``GET /``, ``GET /health``, ``GET /list_envs`` and ``POST /close`` (`agentgym.server`).

``/create`` starts the new env on task ``id % 544`` as upstream does, or, given
``goal`` (an item a recipe makes), on that goal with ``commands`` (when given)
as the listed crafting commands; other body keys (upstream clients send
``minecraft_dir``) are ignored.  ``done`` is false and ``reward`` 0.0 after
create and reset.  Ids and ``data_idx`` must be JSON integers (not strings or
booleans); ``data_idx`` must be a task id.  Errors: see ``agentgym.server``
(unknown id 404, an id closed for idleness 410, step after done 409, bad body 422, env cap 503); an action or
``commands`` over its length limit is a 422.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from ..episodes import add_episode_routes, drop_route, episode
from ..open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry, InvalidRequestError
from ..options import add_server_options, app_factory
from ..registry import get_env_spec
from ..server import create_app
from .data import cookbook
from .env import TextCraftEnv, goal_item

log = logging.getLogger("agentgym.textcraft")

DEFAULT_PORT = 8000  # upstream's `textcraft` default
DEFAULT_MAX_ENVS = 4096
MAX_COMMANDS_CHARS = 65536


class CreateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    commands: str | None = Field(None, max_length=MAX_COMMANDS_CHARS)
    goal: str | None = Field(None, max_length=200)


def build_app(
    max_envs: int = DEFAULT_MAX_ENVS,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
) -> FastAPI:
    """Build the crafting tree and return the TextCraft app; envs idle for ``idle_timeout_s`` are closed (0: never)."""
    book = cookbook()
    spec = get_env_spec("textcraft")
    registry: EnvRegistry[TextCraftEnv] = EnvRegistry(
        lambda: TextCraftEnv(book), max_envs, spec.id_field, idle_timeout_s, evict_idle_s
    )
    app = create_app("TextCraft", registry, spec.family)
    add_episode_routes(app, registry)
    log.info("textcraft ready", extra={"goals": len(book.goals), "max_envs": max_envs})
    drop_route(app, "/create")

    @app.post("/create")
    def create(body: CreateRequest | None = None) -> dict[str, Any]:
        body = body or CreateRequest()
        if body.commands is not None and body.goal is None:
            raise InvalidRequestError("invalid request: commands needs a goal")
        if body.goal is not None:
            goal_item(book, body.goal)  # refuse a bad goal before an env is made
        env_id = registry.create()
        with registry.use(env_id) as env:
            if body.goal is not None:
                return episode(env_id, env.start(body.goal, body.commands))
            return episode(env_id, env.reset(env_id % len(book.goals)))

    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """TextCraft's server options."""
    add_server_options(parser, DEFAULT_MAX_ENVS)


app_from_args = app_factory(build_app)
