"""WebShop's HTTP routes (AgentGym protocol family A).

==========================  =======================================  ===========================================
route                       request                                  response
==========================  =======================================  ===========================================
GET  /                                                               ``"ok"``
GET  /health                                                         ``{"open", "max_envs", "reaped",
                                                                     "idle_timeout_s", "in_flight",
                                                                     "oldest_request_s"}``
POST /create                no body                                  env_idx (bare int)
POST /reset                 ``{"env_idx", "session_id": int|null}``  ``[observation, null]``
POST /step                  ``{"env_idx", "action"}``                ``{"state", "reward", "done", "info"}``
GET  /available_actions     ``?env_idx=``                            ``{"has_search_bar", "clickables"}``
GET  /instruction_text      ``?env_idx=``                            str
GET  /observation           ``?env_idx=``                            str
GET  /state                 ``?env_idx=``                            ``{"url", "html", "instruction_text"}``
GET  /list_envs                                                      [int]
POST /close                 ``{"env_idx"}``                          ``true``
==========================  =======================================  ===========================================

``info`` is ``null`` except on the ``buy now`` step, where it is the reward
breakdown (``reward.RewardBreakdown``).  Errors: see ``agentgym.server``;
an action longer than ``MAX_ACTION_CHARS`` is a 422.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

from ..cache import cache_root
from ..open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry
from ..options import add_server_options, app_factory
from ..registry import get_env_spec
from ..server import create_app
from .data import GoalSource, load_shop
from .env import WebShopEnv
from .search import SearchEngine

log = logging.getLogger("agentgym.webshop")

DEFAULT_PORT = 36001
DEFAULT_MAX_ENVS = 4096
MAX_ACTION_CHARS = 4096


class ResetRequest(BaseModel):
    env_idx: int
    session_id: int | None = None


class StepRequest(BaseModel):
    env_idx: int
    action: str = Field(max_length=MAX_ACTION_CHARS)


def build_app(
    data_dir: str | None = None,
    goal_source: GoalSource = "synthetic",
    max_envs: int = DEFAULT_MAX_ENVS,
    show_attrs: bool = False,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
) -> FastAPI:
    """Load the shop and its search index, and return the WebShop app; envs idle for ``idle_timeout_s`` are
    closed (0: never)."""
    shop = load_shop(data_dir, goal_source)
    engine = SearchEngine(shop.products, shop.products_hash, cache_root())
    spec = get_env_spec("webshop")
    registry: EnvRegistry[WebShopEnv] = EnvRegistry(
        lambda: WebShopEnv(shop, engine, show_attrs), max_envs, spec.id_field, idle_timeout_s, evict_idle_s
    )
    app = create_app("WebShop", registry, spec.family)
    log.info(
        "webshop ready",
        extra={
            "products": len(shop.products),
            "goals": len(shop.goals),
            "goal_source": goal_source,
            "data_dir": str(shop.data_dir),
            "data_hash": shop.data_hash,
            "max_envs": max_envs,
            "idle_timeout_s": idle_timeout_s,
        },
    )

    @app.post("/reset")
    def reset(body: ResetRequest) -> list[Any]:
        with registry.use(body.env_idx) as env:
            return [env.reset(body.session_id), None]

    @app.post("/step")
    def step(body: StepRequest) -> dict[str, Any]:
        with registry.use(body.env_idx) as env:
            result = env.step(body.action)
        return {"state": result.observation, "reward": result.reward, "done": result.done, "info": result.extra["info"]}

    @app.get("/available_actions")
    def available_actions(env_idx: int) -> dict[str, Any]:
        with registry.use(env_idx) as env:
            return env.available_actions()

    @app.get("/instruction_text")
    def instruction_text(env_idx: int) -> str:
        with registry.use(env_idx) as env:
            return env.instruction_text

    @app.get("/observation")
    def observation(env_idx: int) -> str:
        with registry.use(env_idx) as env:
            return env.observation

    @app.get("/state")
    def state(env_idx: int) -> dict[str, str]:
        with registry.use(env_idx) as env:
            return env.state()

    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """WebShop's server options (shared by ``agentgym serve webshop`` and ``webshop``)."""
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("WEBSHOP_DATA_DIR"),
        help="directory with WebShop's data files (default: $WEBSHOP_DATA_DIR, else the "
        "catalogue generated into the cache)",
    )
    parser.add_argument(
        "--goals",
        dest="goal_source",
        choices=("synthetic", "human"),
        default="synthetic",
        help="build goals from items_ins_v2_1000.json (synthetic) or items_human_ins.json (human)",
    )
    parser.add_argument("--show-attrs", action="store_true", help="show an Attributes button on item pages")
    add_server_options(parser, DEFAULT_MAX_ENVS)


app_from_args = app_factory(build_app)
