"""Path finding for BabyAI's high-level actions, and the oracle.

Poses are ``(x, y, direction)`` in minigrid's frame: ``x`` grows to the right,
``y`` downwards, direction 0 faces +x, 1 +y, 2 -x, 3 -y (`DIRECTIONS`).
`Reach` is a breadth-first search over poses with minigrid's three moving
actions (forward, turn left, turn right, tried in that order), stepping only
onto cells that ``passable`` accepts: the shortest action sequence to any
pose, and to face a given cell (stand next to it, turned towards it).

`Oracle` is the reference player: minigrid's `BabyAIBot` (which reads the
true level) picks each low-level action and `Oracle.act` writes it as one of
the env's text actions (a pickup names the object in front of the agent), so
the oracle plays through `BabyAIEnv.step` like any agent.  The bot cannot
solve every level (minigrid says: ``PutNext*Carrying``, ``KeyInBox``; its
planning loop also never ends on a few levels, which `Oracle` cuts short);
`play` then stops early.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable, Iterable

from ..paths import moves_to

if TYPE_CHECKING:
    from ..game import StepResult
    from .env import BabyAIEnv

Cell = tuple[int, int]
Pose = tuple[int, int, int]
DIRECTIONS: tuple[Cell, ...] = ((1, 0), (0, 1), (-1, 0), (0, -1))
# minigrid's low-level action numbers
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, WAIT = range(7)
MAX_REPLANS = 1000
TEXT_OF_LOW = {LEFT: "turn left", RIGHT: "turn right", FORWARD: "move forward", DROP: "drop", TOGGLE: "toggle"}


class Reach:
    """Poses reachable from ``start`` over ``passable`` cells, searched breadth first with shortest action sequences.

    With ``targets`` the search stops once it has faced each of those cells (or has nothing left to search);
    `path_to_face` answers for those cells then.
    """

    def __init__(
        self, passable: Callable[[int, int], bool], start: Pose, targets: Iterable[Cell] | None = None
    ) -> None:
        self.start = start
        self.came: dict[Pose, tuple[Pose, int] | None] = {start: None}
        self.faced: dict[Cell, Pose] = {}  # cell -> the first pose found facing it
        wanted = None if targets is None else set(targets)
        free: dict[Cell, bool] = {}
        queue = deque([start])
        while queue and (wanted is None or wanted):
            pose = queue.popleft()
            x, y, d = pose
            dx, dy = DIRECTIONS[d]
            front = (x + dx, y + dy)
            if front not in self.faced:
                self.faced[front] = pose
                if wanted is not None:
                    wanted.discard(front)
            if front not in free:
                free[front] = passable(*front)
            moves = ((FORWARD, (x + dx, y + dy, d)), (LEFT, (x, y, (d - 1) % 4)), (RIGHT, (x, y, (d + 1) % 4)))
            for action, nxt in moves:
                if nxt in self.came or (action == FORWARD and not free[front]):
                    continue
                self.came[nxt] = (pose, action)
                queue.append(nxt)

    def path_to(self, pose: Pose) -> list[int] | None:
        """The actions of a shortest way to ``pose``; None when it was not reached."""
        return moves_to(self.came, pose) if pose in self.came else None

    def path_to_face(self, cell: Cell) -> list[int] | None:
        """The actions of a shortest way to stand next to ``cell`` facing it (``[]`` when already so); None if none.

        Among equally short ways, the first the search found is taken.
        """
        pose = self.faced.get(cell)
        return None if pose is None else self.path_to(pose)


class Oracle:
    """Minigrid's BabyAI bot, playing ``env``'s current episode in the env's text actions (start it after reset)."""

    def __init__(self, env: BabyAIEnv) -> None:
        from minigrid.utils.baby_ai_bot import BabyAIBot, DisappearedBoxError

        self.env = env
        self.bot = BabyAIBot(env.gym)
        self._gave_up = (AssertionError, DisappearedBoxError)

    def act(self) -> str | None:
        """The next text action; None when the bot gives up (nothing left to explore, no plan settles, or it
        believes the mission done)."""
        try:
            low = self._replan()
        except self._gave_up:
            return None
        if low is None or low == WAIT:  # cut short, or the bot thinks it is done
            return None
        if low == PICKUP:
            front = next((t for t in self.env.things if (t.front, t.right) == (1, 0)), None)
            return f"pickup {front.label}" if front is not None else "check available actions"
        return TEXT_OF_LOW.get(int(low), "check available actions")

    def _replan(self) -> int | None:
        """`BabyAIBot.replan`, with its planning loop cut at `MAX_REPLANS` rounds (on a few levels, e.g.
        UnlockToUnlock seed 4, minigrid's own loop never ends): the suggested action, or None when cut."""
        bot = self.bot
        bot._process_obs()
        bot._check_erroneous_box_opening(None)
        for subgoal in bot.stack:
            subgoal.update_agent_attributes()
        if bot.stack:
            bot.stack[-1].replan_after_action(None)
        while bot.stack and bot.stack[-1].is_exploratory():
            bot.stack.pop()
        suggested = None
        for _ in range(MAX_REPLANS):
            if not bot.stack:
                break
            suggested = bot.stack[-1].replan_before_action()
            if suggested is not None:
                break
        else:
            return None
        if not bot.stack:
            suggested = WAIT
        bot._remember_current_state()
        return suggested


def play(env: BabyAIEnv, task_id: int, max_actions: int = 1000) -> tuple[list[str], list[StepResult]]:
    """Reset ``env`` to ``task_id`` and let the `Oracle` play it: (actions, step results), until done or it gives up."""
    env.reset(task_id)
    oracle, actions, results = Oracle(env), [], []
    for _ in range(max_actions):
        action = oracle.act()
        if action is None:
            break
        actions.append(action)
        results.append(env.step(action))
        if results[-1].done:
            break
    return actions, results
