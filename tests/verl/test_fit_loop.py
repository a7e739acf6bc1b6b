"""The SFT and reward-model trainers' shared loop: which steps train on which items, when it evaluates, when it
stops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl.trainer.fit_loop import BestSoFar, run_epochs


@dataclass
class Settings:
    batch_size: int = 2
    epochs: int = 2
    eval_before_train: bool = True
    eval_freq: int = 0
    patience: int = 5
    seed: int = 7


def run(settings: Settings, dev: list[float], n_items: int = 5) -> tuple[list, tuple[int, bool], BestSoFar]:
    events: list = []
    best = BestSoFar(higher_is_better=False)
    figures = iter(dev)

    def measure(step: int) -> float:
        events.append(["eval", step, next(figures), False])  # the last field: kept as the best so far
        return events[-1][2]

    def keep(step: int) -> None:
        assert events[-1][:2] == ["eval", step]
        events[-1][3] = True

    def train_step(step: int, epoch: int, indices: np.ndarray) -> None:
        events.append(("train", step, epoch, indices.tolist()))

    result = run_epochs(n_items, settings, train_step, measure, best, keep)
    return [tuple(event) for event in events], result, best


def test_epochs_of_seeded_batches_with_an_evaluation_before_and_after_each_epoch() -> None:
    events, result, best = run(Settings(), [3.0, 2.0, 2.5])
    first, second = np.random.RandomState(7).permutation(5), np.random.RandomState(8).permutation(5)
    assert (
        events
        == [
            ("eval", 0, 3.0, True),
            ("train", 1, 0, first[0:2].tolist()),
            ("train", 2, 0, first[2:4].tolist()),  # 5 items, batches of 2: the fifth waits for another epoch
            ("eval", 2, 2.0, True),
            ("train", 3, 1, second[0:2].tolist()),
            ("train", 4, 1, second[2:4].tolist()),
            ("eval", 4, 2.5, False),
        ]
    )
    assert result == (4, False) and (best.value, best.step, best.misses) == (2.0, 2, 1)


def test_without_eval_before_train_the_first_evaluation_is_after_training_and_always_kept() -> None:
    events, result, best = run(Settings(eval_before_train=False, patience=1), [4.0, 5.0])
    assert [e for e in events if e[0] == "eval"] == [("eval", 2, 4.0, True), ("eval", 4, 5.0, False)]
    assert [e[:2] for e in events if e[0] == "train"] == [("train", 1), ("train", 2), ("train", 3), ("train", 4)]
    assert result == (4, True) and (best.value, best.step, best.misses) == (4.0, 2, 1)


def test_eval_freq_evaluates_inside_the_epoch_and_patience_stops_it() -> None:
    events, result, best = run(Settings(batch_size=1, eval_freq=2, patience=2), [1.0, 0.5, 0.7, 0.6, 9.9])
    assert [e[:2] for e in events] == [
        ("eval", 0),
        ("train", 1),
        ("train", 2),
        ("eval", 2),
        ("train", 3),
        ("train", 4),
        ("eval", 4),  # 0.7: a miss
        ("train", 5),
        ("eval", 5),  # the epoch's end (step 5 is no multiple of 2): 0.6, a second miss, so it stops
    ]
    assert result == (5, True) and (best.value, best.step) == (0.5, 2)


def test_higher_is_better_and_the_first_figure_always_counts() -> None:
    best = BestSoFar(higher_is_better=True)
    assert [best.offer(v, s) for s, v in enumerate([-5.0, -6.0, 0.8, 0.8, 0.9])] == [True, False, True, False, True]
    assert (best.value, best.step, best.misses) == (0.9, 4, 0)
