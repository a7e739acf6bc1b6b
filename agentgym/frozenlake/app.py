"""FrozenLake's HTTP routes (AgentGym protocol family B, in TextCraft's shapes).

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

``/create`` starts the new env on task ``id % 1300``, as TextCraft's does.
``done`` is false and ``reward`` 0.0 after create and reset.  Ids and
``data_idx`` must be JSON integers (not strings or booleans); ``data_idx`` must
be a task id.  Errors: see ``agentgym.server`` (unknown id 404, an id closed for idleness 410, step after done
409, bad body 422, env cap 503); an action over 4096 characters is a 422.
"""

from __future__ import annotations

from ..episodes import episode_server
from .data import NUM_TASKS

DEFAULT_PORT = 36101
DEFAULT_MAX_ENVS = 4096

build_app, add_arguments, app_from_args = episode_server(
    "FrozenLake", "agentgym.frozenlake.env:FrozenLakeEnv", NUM_TASKS, DEFAULT_MAX_ENVS
)
