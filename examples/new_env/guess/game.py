"""The game and its tasks.

Task ``i`` (``0 <= i < NUM_TASKS``) hides the number ``1 + (37 * i) % 100``. ``reset`` answers ``I picked a number
from 1 to 100. You have 8 guesses.``; ``step("guess 42")`` (or ``42``) answers ``42 is too low. Guesses left: 7.``,
``42 is too high. ...`` or ``42 is right!`` (reward 1.0, done); anything else is ``Invalid action "...": write
guess N, with N from 1 to 100.`` and uses a guess too. The eighth guess ends the episode (``You are out of
guesses.``).
"""

from __future__ import annotations

import re

from agentgym.game import StepResult, require_episode
from agentgym.open_envs import InvalidRequestError
from agentgym.splits import Split, task_ids_by_split

NUM_TASKS = 300
LOW, HIGH, MAX_GUESSES = 1, 100, 8
task_ids = task_ids_by_split({"test": range(0, 50), "dev": range(50, 100), "train": range(100, NUM_TASKS)})
_GUESS = re.compile(r"(?:guess )?(\d{1,3})\.?")


def secret(task_id: int) -> int:
    """Task ``task_id``'s hidden number; a 422 unless ``0 <= task_id < NUM_TASKS``."""
    if not 0 <= task_id < NUM_TASKS:
        raise InvalidRequestError(
            f"invalid request: data_idx {task_id} out of range: expected 0 <= data_idx < {NUM_TASKS}"
        )
    return LOW + (37 * task_id) % (HIGH - LOW + 1)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, instruction)]`` of ``split``: what the datasets are made of."""
    return [(i, "guess the secret number") for i in task_ids(split)]


class GuessEnv:
    """One game (see the module docstring): ``reset(task_id) -> str``, ``step(action) -> StepResult``,
    ``observation``."""

    def __init__(self) -> None:
        self.number: int | None = None
        self.observation, self.done, self.guesses = "", False, 0

    def reset(self, task_id: int) -> str:
        self.number, self.done, self.guesses = secret(task_id), False, 0
        self.observation = f"I picked a number from {LOW} to {HIGH}. You have {MAX_GUESSES} guesses."
        return self.observation

    def step(self, action: str) -> StepResult:
        require_episode(self.number is not None, self.done)
        self.guesses += 1
        match, reward = _GUESS.fullmatch(" ".join(action.lower().split())), 0.0
        if match is None:
            message = f'Invalid action "{action.strip()}": write guess N, with N from {LOW} to {HIGH}.'
        elif int(match.group(1)) == self.number:
            message, reward, self.done = f"{self.number} is right!", 1.0, True
        else:
            guess = int(match.group(1))
            message = f"{guess} is too {'low' if guess < self.number else 'high'}."
        if not self.done:
            self.done = self.guesses >= MAX_GUESSES
            message += " You are out of guesses." if self.done else f" Guesses left: {MAX_GUESSES - self.guesses}."
        self.observation = message
        return StepResult(message, reward, self.done)
