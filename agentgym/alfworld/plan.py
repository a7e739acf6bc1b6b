"""The oracle: the plan Fast Downward finds for a game, through the engine ALFWorld uses.

`oracle(game_id)` loads the game in an `env.Engine`, has it plan once from
the start (``policy_commands``, as ALFWorld's ``AlfredExpert`` of type
``planner`` reads them) and answers that plan as the commands the player types
(``go to shelf 7``, ``take keychain 2 from shelf 7``, ...).  Playing them in
order wins the game: the engine is deterministic.  The reference solution the
tests play.  ``AlfWorldEnv.reset(game, plan=True)`` keeps the same plan in
``env.plan`` while it starts the game (one load instead of two).
"""

from __future__ import annotations

from typing import Callable

from .data import Game, generated_game
from .env import Engine


def oracle(game_id: int, games: Callable[[int], Game] = generated_game) -> list[str]:
    """The commands of the planner's plan for game ``game_id`` (a generated task by default); [] if it finds none."""
    engine = Engine()
    try:
        return [str(command) for command in engine.reset(games(game_id), plan=True)["policy_commands"]]
    finally:
        engine.close()
