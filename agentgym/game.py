"""What the envs' game classes share: the result of a step, the task lookup, the episode-state check and the parsing
of moves."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

from .open_envs import EpisodeStateError, InvalidRequestError

T = TypeVar("T")

DIRECTIONS = ("up", "down", "left", "right")


@dataclass(frozen=True)
class StepResult:
    """What one action did: the observation after it, its reward, whether the episode is over, and ``extra``, the
    env's own fields of its ``/step`` answer by answer key (BabyAI's and SciWorld's ``score``, ALFWorld's
    ``available_actions``, WebShop's ``info``; none for the other envs)."""

    observation: str
    reward: float
    done: bool
    extra: Mapping[str, Any] = field(default_factory=dict)

    def answer(self) -> dict[str, Any]:
        """The ``/step`` answer: ``{"observation", "reward", <the extra fields>, "done"}``."""
        return {"observation": self.observation, "reward": self.reward, **self.extra, "done": self.done}


def task_of(lookup: Callable[[int], T], task_id: int) -> T:
    """``lookup(task_id)``, a task's data; its ValueError (an id out of range) becomes `InvalidRequestError` (400)."""
    try:
        return lookup(task_id)
    except ValueError as bad:
        raise InvalidRequestError(f"invalid request: {bad}") from None


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


def last_grid(observation: str, row: re.Pattern[str]) -> list[str] | None:
    """The last run of consecutive lines of ``observation`` that match ``row`` (stripped), e.g. the last map or
    room an env printed; None when no line matches."""
    blocks: list[list[str]] = []
    previous = False
    for line in observation.splitlines():
        matched = bool(row.match(line.strip()))
        if matched and not previous:
            blocks.append([])
        if matched:
            blocks[-1].append(line.strip())
        previous = matched
    return blocks[-1] if blocks else None
