"""Write an offline countdown dataset in verl's single-turn format (train / dev / test parquet files).

Each task draws 3 or 4 numbers in 1..20 and combines them into a random expression (every number
once, ``+ - * /``); it is kept when the value is an integer in 1..100, so every task is solvable.
Tasks are unique across all splits (by sorted numbers and target) and depend only on ``--seed``.

Row columns: ``data_source`` ("countdown"), ``prompt`` (one user message), ``ability``
("arithmetic"), ``reward_model`` (``{"style": "rule", "ground_truth": {"target", "numbers"}}``) and
``extra_info`` (``{"split", "index"}``); scored by `verl.utils.reward_score.countdown`.

    python scripts/make_countdown_data.py --out_dir data/countdown --n_train 2000 --n_test 200 --n_dev 100 --seed 0
"""

from __future__ import annotations

import argparse
import operator
import random
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

MAX_TARGET = 100
NUMBER_RANGE = (1, 20)
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
SPLITS = ("train", "dev", "test")

INSTRUCTION = (
    "Using the numbers {numbers}, write an arithmetic expression that equals {target}. "
    "You may use +, -, *, / and parentheses, and you must use every number exactly once. "
    "You may think first, then give only the expression inside <answer></answer> tags. "
    "For example, with the numbers [2, 3, 4] and the target 20, a correct final answer is <answer>(2 + 3) * 4</answer>."
)


def random_value(rng: random.Random, numbers: Sequence[int]) -> Fraction | None:
    """The value of a random expression using each number once (two random operands and a random operator
    combined until one is left); None on a division by zero."""
    pool = [Fraction(x) for x in numbers]
    while len(pool) > 1:
        left, right = (pool.pop(rng.randrange(len(pool))) for _ in range(2))
        op = rng.choice(tuple(OPERATORS))
        if op == "/" and right == 0:
            return None
        pool.append(OPERATORS[op](left, right))
    return pool[0]


def draw_task(rng: random.Random) -> tuple[list[int], int]:
    """``(numbers, target)`` of a solvable task (retries until the expression's value is an integer in 1..100)."""
    while True:
        numbers = [rng.randint(*NUMBER_RANGE) for _ in range(rng.choice((3, 4)))]
        value = random_value(rng, numbers)
        if value is not None and value.denominator == 1 and 1 <= value <= MAX_TARGET:
            return numbers, int(value)


def make_row(numbers: list[int], target: int, split: str, index: int) -> dict[str, Any]:
    return {
        "data_source": "countdown",
        "prompt": [{"role": "user", "content": INSTRUCTION.format(numbers=numbers, target=target)}],
        "ability": "arithmetic",
        "reward_model": {"style": "rule", "ground_truth": {"target": target, "numbers": numbers}},
        "extra_info": {"split": split, "index": index},
    }


def make_splits(sizes: dict[str, int], seed: int) -> dict[str, pd.DataFrame]:
    """One frame per split; no ``(sorted numbers, target)`` appears twice across all of them."""
    rng = random.Random(seed)
    seen: set[tuple[tuple[int, ...], int]] = set()
    frames = {}
    for split, size in sizes.items():
        rows = []
        while len(rows) < size:
            numbers, target = draw_task(rng)
            key = (tuple(sorted(numbers)), target)
            if key not in seen:
                seen.add(key)
                rows.append(make_row(numbers, target, split, len(rows)))
        frames[split] = pd.DataFrame(rows, columns=list(COLUMNS))
    return frames


def main(argv: Sequence[str] | None = None) -> dict[str, Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out_dir", default="data/countdown")
    parser.add_argument("--n_train", type=int, default=2000)
    parser.add_argument("--n_dev", type=int, default=100)
    parser.add_argument("--n_test", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = {split: getattr(args, f"n_{split}") for split in SPLITS}
    if min(sizes.values()) < 0:
        parser.error(f"split sizes must be >= 0, got {sizes}")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, frame in make_splits(sizes, args.seed).items():
        paths[split] = out_dir / f"{split}.parquet"
        frame.to_parquet(paths[split], index=False)
        print(f"wrote {len(frame)} {split} tasks to {paths[split]}")
    return paths


if __name__ == "__main__":
    main()
