"""The command-line options every env server takes, and building a server's app from its parsed options.

Every server module (see `agentgym.launcher`) calls `add_server_options` in its
``add_arguments(parser)`` and defines ``app_from_args = app_factory(build_app)``:
``build_app``'s parameters are named after the options (``--max-envs`` gives
``max_envs``), so each one is filled from the parsed option of that name.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Callable

from fastapi import FastAPI

from .open_envs import DEFAULT_EVICT_IDLE_S, DEFAULT_IDLE_TIMEOUT_S


def add_server_options(parser: argparse.ArgumentParser, default_max_envs: int, envs: str = "envs") -> None:
    """``--max-envs`` (the most ``envs`` open at once, ``default_max_envs`` by default), ``--idle-timeout-s`` and
    ``--evict-idle-s``."""
    parser.add_argument(
        "--max-envs",
        type=int,
        default=default_max_envs,
        help=f"most {envs} open at once; past it /create answers 503 (default %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout-s",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        help="close an env that has had no request for this many seconds, freeing its resources; "
        "later requests naming it answer 410 (default %(default)g; 0: never)",
    )
    parser.add_argument(
        "--evict-idle-s",
        type=float,
        default=DEFAULT_EVICT_IDLE_S,
        help="at the env cap, /create closes the env idle longest once it has been idle this many seconds; "
        "later requests naming it answer 410 (default %(default)g; 0: never)",
    )


def app_factory(build_app: Callable[..., FastAPI]) -> Callable[[argparse.Namespace], FastAPI]:
    """A server module's ``app_from_args(args)``: ``build_app`` called with every one of its parameters set to the
    parsed option of the same name (an option the parser does not define is an AttributeError)."""
    names = list(inspect.signature(build_app).parameters)

    def app_from_args(args: argparse.Namespace) -> FastAPI:
        return build_app(**{name: getattr(args, name) for name in names})

    return app_from_args
