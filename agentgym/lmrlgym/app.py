"""LMRL-Gym's HTTP server: Maze under ``/maze`` and Wordle under ``/wordle`` (AgentGym protocol family B).

==============================  =======================================  ==========================================
route (``<g>``: maze, wordle)   request                                  response
==============================  =======================================  ==========================================
GET  /                                                                   ``"ok"`` (the health check)
GET  /health                                                             the JSON health: both games summed, ``games``
                                                                         per game (see ``agentgym.server``)
POST /<g>/create                no body (any body is ignored)            ``{"id"}``: a new env, no episode yet
POST /maze/reset                ``{"id", "game": int}``                  ``{"id", "observation", "reward", "done"}``
POST /wordle/reset              ``{"id", "seed": int}``                  ``{"id", "observation", "reward", "done"}``
POST /<g>/step                  ``{"id", "action": str}``                ``{"observation", "reward", "done"}``
GET  /<g>/observation           ``?id=``                                 the current observation (str)
GET  /wordle/filtered_vocab     ``?id=``                                 the words that can still be the secret
                                                                         ([str])
GET  /<g>/list_envs                                                      [int]
POST /<g>/close                 ``{"id"}``                               ``true``
GET  /<g>/                                                               ``"ok"``
==============================  =======================================  ==========================================

Each game keeps its own envs and ids (both count from 0).  ``reward`` is 0.0
and ``done`` false after a reset.  Ids, ``game`` and ``seed`` must be JSON
integers (not strings or booleans), ``game`` a maze task id and ``seed`` a
Wordle task id.  Errors (see ``agentgym.server``): unknown id 404; an id closed for idleness 410; a step
before the first reset or after the end, or an observation before the first
reset, 409; bad body or query 422 (an action over 4096 characters too);
env cap 503.  The games: `agentgym.maze.env`, `agentgym.wordle.env`.

``/wordle/filtered_vocab`` is the route AgentGym's Wordle client calls right
after ``/wordle/create`` to list the game's words in its first prompt.  As
upstream (LMRL-Gym's ``Vocabulary.filtered_vocab``), it answers the words of
the secret list still consistent with every guess of the episode so far: all
2,135 answers (alphabetical) for a new env or right after a reset, fewer after
each guess (`agentgym.wordle.plan.consistent`); it needs no reset first and
still answers once the episode is over.  Upstream serves one list as both the
guess list and the secret list; here the game also accepts the larger guess
list (`agentgym.wordle.data.guesses`), so every listed word is a valid guess
but not every valid guess is listed.
"""

import argparse
from typing import Any

from fastapi import FastAPI
from pydantic import StrictInt

from ..episodes import EpisodeReset, add_episode_routes
from ..open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S, EnvRegistry, registries_lifespan
from ..options import add_server_options, app_factory
from ..registry import get_env_spec
from ..server import create_app, install_error_handlers
from ..spec import EnvSpec

DEFAULT_PORT = 36103
DEFAULT_MAX_ENVS = 4096


class MazeReset(EpisodeReset):
    """``{"id", "game"}``."""

    game: StrictInt

    @property
    def task_id(self) -> int:
        return self.game


class WordleReset(EpisodeReset):
    """``{"id", "seed"}``."""

    seed: StrictInt

    @property
    def task_id(self) -> int:
        return self.seed


def _game_app(title: str, spec: EnvSpec, registry: EnvRegistry, reset_model: type[EpisodeReset]) -> FastAPI:
    """One game's routes, in the shapes of its ``spec``'s family: create, close and list_envs from `create_app`,
    reset, step and observation from `add_episode_routes`."""
    app = create_app(title, registry, spec.family)
    add_episode_routes(app, registry, reset_model=reset_model)
    return app


def build_app(
    max_envs: int = DEFAULT_MAX_ENVS,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    evict_idle_s: float = DEFAULT_EVICT_IDLE_S,
) -> FastAPI:
    """The LMRL-Gym app; ``max_envs`` caps each game's open envs, an env idle for ``idle_timeout_s`` is closed
    (0: never).  The games are imported here."""
    from ..maze.env import MazeEnv
    from ..wordle.data import answers, guesses
    from ..wordle.env import WordleEnv
    from ..wordle.plan import consistent

    answers(), guesses()  # read the word lists now, not on the first reset
    maze_spec, wordle_spec = get_env_spec("maze"), get_env_spec("wordle")
    mazes = EnvRegistry(MazeEnv, max_envs, maze_spec.id_field, idle_timeout_s, evict_idle_s)
    words = EnvRegistry(WordleEnv, max_envs, wordle_spec.id_field, idle_timeout_s, evict_idle_s)
    # a mounted app's lifespan never runs: the top app sweeps and closes both games' envs
    app = FastAPI(
        title="LMRL-Gym", docs_url=None, redoc_url=None, openapi_url=None, lifespan=registries_lifespan(mazes, words)
    )
    install_error_handlers(app)

    @app.get("/")
    async def alive() -> str:
        return "ok"

    @app.get("/health")
    async def health() -> dict[str, Any]:
        games = {"maze": mazes.health(), "wordle": words.health()}
        total = {key: sum(game[key] for game in games.values()) for key in ("open", "max_envs", "reaped", "in_flight")}
        return {
            **total,
            "idle_timeout_s": idle_timeout_s,
            "oldest_request_s": max(game["oldest_request_s"] for game in games.values()),
            "games": games,
        }

    app.mount("/maze", _game_app("Maze", maze_spec, mazes, MazeReset))
    wordle = _game_app("Wordle", wordle_spec, words, WordleReset)

    @wordle.get("/filtered_vocab")
    def filtered_vocab(id: int) -> list[str]:
        with words.use(id) as env:
            history = list(env.history)
        return consistent(history)

    app.mount("/wordle", wordle)
    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The LMRL-Gym server's options."""
    add_server_options(parser, DEFAULT_MAX_ENVS, "envs of each game")


app_from_args = app_factory(build_app)
