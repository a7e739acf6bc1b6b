"""Command line: start one environment server.

    agentgym serve <env> [--host 127.0.0.1] [--port P] [--log-level info] [env options]
    agentgym list
    webshop --host H --port P [webshop options]        # the upstream console commands
    textcraft --host H --port P [textcraft options]   (likewise babyai, sciworld, alfworld;
                                                      lmrlgym serves maze and wordle)
    python -m agentgym.launcher serve webshop --port 36001

Each server runs one uvicorn worker (env state lives in the process) and binds
127.0.0.1 unless told otherwise.  The envs that can be served are those whose
spec (``agentgym/<env>/spec.toml``, `agentgym.registry`) names an ``app``: the
module that serves it, providing ``DEFAULT_PORT``, ``add_arguments(parser)``
and ``app_from_args(args) -> FastAPI``; importing it must be cheap (data is
loaded in ``app_from_args``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType
from typing import Callable, Sequence

import uvicorn

from .registry import ENV_SPECS
from .server import configure_logging

ENVS: dict[str, str] = {name: spec.app for name, spec in sorted(ENV_SPECS.items()) if spec.app}


def _env_module(name: str) -> ModuleType:
    return importlib.import_module(ENVS[name])


def _add_server_arguments(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    parser.add_argument("--port", type=int, default=default_port, help="port to bind (default %(default)s)")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def _serve(module: ModuleType, args: argparse.Namespace) -> None:
    configure_logging(args.log_level)
    app = module.app_from_args(args)
    uvicorn.run(
        app, host=args.host, port=args.port, workers=1, access_log=False, log_config=None, log_level=args.log_level
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``agentgym``: serve an environment by name."""
    parser = argparse.ArgumentParser(prog="agentgym", description="AgentGym environment servers")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="print the environments that can be served")
    serve = commands.add_parser("serve", help="start an environment server")
    envs = serve.add_subparsers(dest="env", required=True, metavar="ENV")
    for name in ENVS:
        module = _env_module(name)
        env_parser = envs.add_parser(name, help=f"serve {name}")
        _add_server_arguments(env_parser, module.DEFAULT_PORT)
        module.add_arguments(env_parser)
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(ENVS))
        return
    _serve(_env_module(args.env), args)


def _upstream_command(name: str, app: str | None = None) -> Callable[[Sequence[str] | None], None]:
    """The upstream console command ``<name> --host H --port P [server options]`` serving the app module ``app``
    (by default that of env ``name``; LMRL-Gym's command serves the one app of its two envs, Maze and Wordle)."""

    def command(argv: Sequence[str] | None = None) -> None:
        module = importlib.import_module(app) if app else _env_module(name)
        parser = argparse.ArgumentParser(prog=name, description=f"{name} environment server")
        _add_server_arguments(parser, module.DEFAULT_PORT)
        module.add_arguments(parser)
        _serve(module, parser.parse_args(argv))

    command.__name__ = f"{name}_main"
    command.__doc__ = f"``{name}``: the upstream {name} server command."
    return command


webshop_main = _upstream_command("webshop")
textcraft_main = _upstream_command("textcraft")
babyai_main = _upstream_command("babyai")
sciworld_main = _upstream_command("sciworld")
alfworld_main = _upstream_command("alfworld")
lmrlgym_main = _upstream_command("lmrlgym", "agentgym.lmrlgym.app")


if __name__ == "__main__":
    main(sys.argv[1:])
