"""A scripted Wordle player that reads only the observations the agent gets.

`WordleExpert` never sees the secret.  Each turn it reads the guesses so far
and their colours from the observation (`read_history`: the lines
``Guess 2: s h i r e -> b y g g b``), keeping those of earlier observations
of the episode too (so a cut observation loses nothing), and asks the solver
(`agentgym.wordle.plan.solver_guess`) for the next guess: the opener first,
then, among the answers that fit every colour so far, the one that leaves the
fewest candidates on average.  It only guesses words of the public answer
list, all of them in the guess list.

``noise`` in [0, 1] makes a weaker player: with that probability (seeded by
``seed``) it guesses another word that fits every colour so far, drawn at
random, instead of the solver's.  ``noise=0`` is deterministic.
"""

from __future__ import annotations

import re

from ..expert import Expert
from .data import spell
from .plan import consistent, solver_guess

_GUESS_LINE = re.compile(r"^Guess (\d+): ((?:[a-z] ){4}[a-z]) -> ((?:[gyb] ){4}[gyb])$", re.MULTILINE)


def read_history(observation: str) -> dict[int, tuple[str, str]]:
    """``{guess number: (word, colours)}`` of the guess lines in ``observation`` (the last line of a number wins)."""
    return {int(n): (word.replace(" ", ""), colours) for n, word, colours in _GUESS_LINE.findall(observation)}


class WordleExpert(Expert):
    """Guesses from the colours seen so far (see the module docstring)."""

    env_name = "wordle"

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.known: dict[int, tuple[str, str]] = {}

    def act(self, observation: str) -> str:
        self.known.update(read_history(observation))
        history = [self.known[n] for n in sorted(self.known)]
        guess, left = solver_guess(history)
        if not history:
            return self._do(spell(guess), f"No guesses yet, so I open with {guess}, which splits the answers best.")
        if left == 0:
            return self._do(spell(guess), f"No word I know fits all the colours, so I try {guess}.")
        if self.noise > 0 and left > 1 and self.rng.random() < self.noise:
            others = [w for w in consistent(history) if w != guess]
            pick = self.rng.choice(others)
            return self._do(spell(pick), f"{left} words fit the colours so far; I try {pick}, one of them.")
        if left <= 2:
            fits = "Only this word fits" if left == 1 else "Two words fit"
            return self._do(spell(guess), f"{fits} the colours so far, so I guess {guess}.")
        return self._do(spell(guess), f"{left} words fit the colours so far; {guess} splits them best, so I guess it.")
