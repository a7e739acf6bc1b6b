"""Wordle's word lists and colour rule, task id (seed) -> secret word, and the train / dev / test splits.

Public API (pure Python; the lists are read from this package once, on first use)::

    from agentgym.wordle.data import answers, guesses, secret_of, feedback, task_ids, task_list
    secret_of(0)                 # task 0's secret word
    feedback("shire", "shore")   # 'g g b g g'
    task_ids("test")             # [0, ..., 199]; "dev" 200-299; "train" 300-2134

Words: ``answers.txt`` (2,135 common words, the possible secrets) and
``guesses.txt`` (6,748 words the game accepts as guesses, answers included),
built from SCOWL word lists (see ``README.md`` and ``LICENSE.scowl`` in this
package).  Task ``i`` (``0 <= i < NUM_TASKS``, sent as ``seed``) has the
``i``-th answer in a fixed shuffle: the answers ordered by the SHA-256 of
``"wordle:" + word`` (`task_order`), so every split mixes all letters.

The colour rule (`feedback`), one letter per position: ``g`` when the guess
has the secret's letter there; else ``y`` when the secret has that letter at
a position that is not already ``g`` and not already claimed by an earlier
``y`` of the same letter (reading left to right); else ``b``.  So a letter
guessed twice and present once is ``y`` (or ``g``) once and ``b`` the other
time.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from ..splits import Split, task_ids_by_split

HERE = Path(__file__).parent
NUM_TASKS = 2135
SPLITS: dict[str, range] = {"test": range(0, 200), "dev": range(200, 300), "train": range(300, NUM_TASKS)}
WORD_LENGTH = 5
MAX_GUESSES = 6


def _read(name: str) -> tuple[str, ...]:
    words = tuple((HERE / name).read_text(encoding="ascii").split())
    bad = [w for w in words if len(w) != WORD_LENGTH or not (w.isascii() and w.isalpha() and w.islower())]
    if bad:
        raise ValueError(f"{name}: not five lower-case letters: {bad[:5]}")
    return words


@functools.lru_cache(maxsize=1)
def answers() -> tuple[str, ...]:
    """The possible secret words, in the file's (alphabetical) order."""
    words = _read("answers.txt")
    if len(words) != NUM_TASKS:
        raise ValueError(f"answers.txt holds {len(words)} words; NUM_TASKS is {NUM_TASKS}")
    return words


@functools.lru_cache(maxsize=1)
def guesses() -> frozenset[str]:
    """Every word accepted as a guess (the answers included)."""
    return frozenset(_read("guesses.txt")) | frozenset(answers())


@functools.lru_cache(maxsize=1)
def task_order() -> tuple[str, ...]:
    """The answers in task order: sorted by the SHA-256 of ``"wordle:" + word``."""
    return tuple(sorted(answers(), key=lambda w: hashlib.sha256(f"wordle:{w}".encode()).hexdigest()))


def secret_of(task_id: int) -> str:
    """Task ``task_id``'s secret word; ValueError unless ``0 <= task_id < NUM_TASKS``."""
    if not 0 <= task_id < NUM_TASKS:
        raise ValueError(f"seed {task_id} out of range: expected 0 <= seed < {NUM_TASKS}")
    return task_order()[task_id]


def feedback(guess: str, secret: str) -> str:
    """The colours of ``guess`` against ``secret`` (two words of one length), spaced: ``"b y g g b"``."""
    colours = ["b"] * len(guess)
    unmatched: list[str] = []
    for i, (g, s) in enumerate(zip(guess, secret)):
        if g == s:
            colours[i] = "g"
        else:
            unmatched.append(s)
    for i, g in enumerate(guess):
        if colours[i] == "b" and g in unmatched:
            colours[i] = "y"
            unmatched.remove(g)
    return " ".join(colours)


def spell(word: str) -> str:
    """``"shire"`` -> ``"s h i r e"``: a word as the game writes it."""
    return " ".join(word)


task_ids = task_ids_by_split(SPLITS)


def task_list(split: Split) -> list[tuple[int, str]]:
    """``[(task id, "find the secret five-letter word in at most 6 guesses")]`` of ``split`` (it names no word)."""
    return [(i, f"find the secret five-letter word in at most {MAX_GUESSES} guesses") for i in task_ids(split)]
