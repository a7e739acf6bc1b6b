"""A scripted player that reads only what the agent sees: it halves the range the answers leave.

``noise`` in [0, 1]: with that probability (seeded) it guesses a random number of that range instead of its
middle."""

from __future__ import annotations

import re

from agentgym.expert import Expert

from .game import HIGH, LOW

_ANSWER = re.compile(r"(\d+) is too (low|high)")


class GuessExpert(Expert):
    env_name = "guess"

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.low, self.high = LOW, HIGH

    def act(self, observation: str) -> str:
        answer = _ANSWER.search(observation)
        if answer and answer.group(2) == "low":
            self.low = max(self.low, int(answer.group(1)) + 1)
        elif answer:
            self.high = min(self.high, int(answer.group(1)) - 1)
        guess = self.rng.randint(self.low, self.high) if self.noisy() else (self.low + self.high) // 2
        return self._do(f"guess {guess}", f"The number is from {self.low} to {self.high}, so I guess {guess}.")
