"""The Wordle game: find a task's secret five-letter word in at most six guesses, from colour feedback.

* ``reset(task_id)`` picks the task's secret (`agentgym.wordle.data.secret_of`)
  and answers the first observation.  Every observation is: what happened
  (one line), the instruction, the guesses so far with their colours (or
  ``No guesses yet.``), and a status line::

      b y g g b
      Find the secret five-letter word in at most 6 guesses. Write a guess as ... b not in the word.
      Guess 1: s h i r e -> b y g g b
      Guesses left: 5.

  After a reset the first line is ``Let's start Wordle!``.
* ``step(action)``: a guess written as five letters separated by spaces
  (``s h i r e``; case, extra spaces and a trailing full stop are ignored).
  A word of the guess list (`agentgym.wordle.data.guesses`) uses a guess and
  is answered with its colours (`agentgym.wordle.data.feedback`), e.g.
  ``b y g g b``.  Anything else uses no guess and changes nothing; its first
  line starts ``invalid word``: ``invalid word: "x y z z y" is not in the
  word list. Nothing changed; no guess was used.`` or ``invalid word:
  "shire" is not five letters separated by spaces (e.g. s h i r e). Nothing
  changed; no guess was used.``  Reward 1.0 and done on guessing the secret
  (status ``You found the word in 3 guesses. The episode is over.``); done
  with 0.0 after the sixth guess otherwise (``You are out of guesses; the
  word was s h o r e. The episode is over.``).  Stepping a finished episode,
  or one never reset, is `EpisodeStateError`.
"""

from __future__ import annotations

import re

from ..game import StepResult, require_episode, task_of
from .data import MAX_GUESSES, feedback, guesses, secret_of, spell

START = "Let's start Wordle!"
INSTRUCTION = (
    f"Find the secret five-letter word in at most {MAX_GUESSES} guesses. Write a guess as its five letters "
    "separated by spaces, e.g. s h i r e. Each guess is answered with one letter per position: g right "
    "letter in the right place, y in the word but elsewhere, b not in the word."
)
_GUESS = re.compile(r"^([a-z] ){4}[a-z]$")


def parse_guess(action: str) -> str | None:
    """``" S h i r e. "`` -> ``"shire"``; None unless the action is five letters separated by spaces."""
    text = " ".join(action.lower().split()).removesuffix(".")
    return text.replace(" ", "") if _GUESS.match(text) else None


class WordleEnv:
    """One game (see the module docstring)."""

    def __init__(self) -> None:
        self.secret: str | None = None
        self.history: list[tuple[str, str]] = []
        self._observation = ""
        self.done = False

    @property
    def observation(self) -> str:
        """The last observation; `EpisodeStateError` before the first reset."""
        require_episode(self.secret is not None, False, "/wordle/reset")
        return self._observation

    def reset(self, task_id: int) -> str:
        secret = task_of(secret_of, task_id)
        self.secret, self.history, self.done = secret, [], False
        return self._observe(START)

    def step(self, action: str) -> StepResult:
        require_episode(self.secret is not None, self.done, "/wordle/reset")
        word, reward = parse_guess(action), 0.0
        if word is None:
            message = (
                f'invalid word: "{action.strip()}" is not five letters separated by spaces (e.g. s h i r e). '
                "Nothing changed; no guess was used."
            )
        elif word not in guesses():
            message = f'invalid word: "{spell(word)}" is not in the word list. Nothing changed; no guess was used.'
        else:
            message = feedback(word, self.secret)
            self.history.append((word, message))
            if word == self.secret:
                reward, self.done = 1.0, True
            elif len(self.history) >= MAX_GUESSES:
                self.done = True
        return StepResult(self._observe(message), reward, self.done)

    def close(self) -> None:
        self.secret, self.history, self._observation = None, [], ""

    def _observe(self, message: str) -> str:
        """What happened, the instruction, the guesses so far and the status (see the module docstring)."""
        assert self.secret is not None
        lines = [message, INSTRUCTION]
        lines += [f"Guess {n}: {spell(word)} -> {colours}" for n, (word, colours) in enumerate(self.history, 1)]
        if not self.history:
            lines.append("No guesses yet.")
        if self.done and self.history[-1][0] == self.secret:
            used = len(self.history)
            lines.append(f"You found the word in {used} {'guess' if used == 1 else 'guesses'}. The episode is over.")
        elif self.done:
            lines.append(f"You are out of guesses; the word was {spell(self.secret)}. The episode is over.")
        else:
            lines.append(f"Guesses left: {MAX_GUESSES - len(self.history)}.")
        self._observation = "\n".join(lines)
        return self._observation
