"""What the envs' game classes share: the result of a step, the episode-state check and the parsing of moves."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .server import EpisodeStateError

DIRECTIONS = ("up", "down", "left", "right")


@dataclass(frozen=True)
class StepResult:
    observation: str
    reward: float
    done: bool


def require_episode(started: bool, done: bool, reset_route: str = "/reset") -> None:
    """Raise `EpisodeStateError` (HTTP 409) unless an episode was started and is not finished."""
    if not started:
        raise EpisodeStateError(f"no episode yet: POST {reset_route} first")
    if done:
        raise EpisodeStateError(f"episode is done: POST {reset_route} to start a new one")


def parse_move(action: str, prefixes: tuple[str, ...] = ("move", "go")) -> str | None:
    """``" Move UP. "`` -> ``"up"``: one of `DIRECTIONS`, optionally after one of ``prefixes``; case, runs of
    spaces and a trailing full stop are ignored.  None for anything else."""
    prefix = "|".join(map(re.escape, prefixes))
    pattern = rf"^(?:(?:{prefix}) )?({'|'.join(DIRECTIONS)})$" if prefixes else rf"^({'|'.join(DIRECTIONS)})$"
    match = re.match(pattern, " ".join(action.lower().split()).removesuffix("."))
    return match.group(1) if match else None
