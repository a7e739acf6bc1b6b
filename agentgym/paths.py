"""Shortest move sequences by breadth-first search, for the envs' planners.

`shortest_moves` searches from a start state, expanding each state's moves in
the order ``moves(state)`` gives them, and answers the moves of a shortest way
to the first state found that ``is_goal`` accepts.  Searches that keep a map of
their own (state -> (previous state, move), None at the start) read a way back
out of it with `moves_to`.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Hashable, Iterable, Mapping, TypeVar

S = TypeVar("S", bound=Hashable)
M = TypeVar("M")


def moves_to(came: Mapping[S, tuple[S, M] | None], state: S) -> list[M]:
    """The moves from the search's start to ``state`` (a key of ``came``), in the order they are made."""
    moves: list[M] = []
    while (link := came[state]) is not None:
        state, move = link
        moves.append(move)
    return moves[::-1]


def shortest_moves(
    start: S, is_goal: Callable[[S], bool], moves: Callable[[S], Iterable[tuple[M, S]]], limit: int | None = None
) -> list[M] | None:
    """The moves of a shortest way from ``start`` to a goal, where ``moves(state)`` gives the (move, next state)
    pairs allowed from ``state``; None when no goal is reachable, or none is found among the first ``limit``
    states seen."""
    came: dict[S, tuple[S, M] | None] = {start: None}
    queue = deque([start])
    while queue and (limit is None or len(came) <= limit):
        state = queue.popleft()
        if is_goal(state):
            return moves_to(came, state)
        for move, nxt in moves(state):
            if nxt not in came:
                came[nxt] = (state, move)
                queue.append(nxt)
    return None
