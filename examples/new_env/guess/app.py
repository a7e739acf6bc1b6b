"""The server: the family-B episode routes (`agentgym.episodes.episode_server`) over `GuessEnv`."""

from agentgym.episodes import episode_server

from .game import NUM_TASKS

DEFAULT_PORT = 36301
DEFAULT_MAX_ENVS = 4096

build_app, add_arguments, app_from_args = episode_server(
    "Guess", "agentgym.guess.game:GuessEnv", NUM_TASKS, DEFAULT_MAX_ENVS
)
