"""The countdown reward (`verl.utils.reward_score.countdown`) and the data script `scripts/make_countdown_data.py`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from verl.utils.reward_score import countdown, get_reward_score_fn

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make_countdown_data.py"
GT = {"target": 10, "numbers": [2, 3, 4]}


def score(answer: str, ground_truth: dict = GT) -> float:
    return countdown.compute_score("countdown", answer, ground_truth)


# ----------------------------------------------------------------------------- reward
def test_correct_answers() -> None:
    assert score("<answer>2 * 3 + 4</answer>") == 1.0
    assert score("Let me think: 2*3 is 6.\n<answer>\n  4 + ( 3 * 2 )\n</answer>") == 1.0
    assert score("<answer>4 +\n3 * 2</answer>") == 1.0  # a line break inside the expression
    assert score("<answer>6 / (1 - 3 / 4)</answer>", {"target": 24, "numbers": [3, 4, 6, 1]}) == 1.0
    assert score("<answer>8 / (3 - 8 / 3)</answer>", {"target": 24, "numbers": [8, 3, 8, 3]}) == 1.0  # exact fractions
    assert score("<answer>-(4 - 6) + 3</answer>", {"target": 5, "numbers": [3, 4, 6]}) == 1.0  # unary minus
    assert score("<answer>(20 - 19) * 7</answer>", {"target": 7, "numbers": [7, 19, 20]}) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "2 + 3 + 4",  # 9: wrong value
        "2 * 3 + 4 + (2 - 2)",  # 10, but 2 used three times
        "(4 + 3) + 3",  # 10, 3 used twice and 2 missing
        "2 * 5",  # 10 from a number that is not given
        "2 * 3 + 4 + 0",  # 10 with an extra number
    ],
)
def test_wrong_value_or_numbers_scores_format_only(answer: str) -> None:
    assert score(f"<answer>{answer}</answer>") == 0.1


def test_number_missing_scores_format_only() -> None:
    assert score("<answer>2 * 3 + 4</answer>", {"target": 10, "numbers": [2, 3, 4, 1]}) == 0.1


@pytest.mark.parametrize(
    "answer",
    [
        "__import__('os').system('true')",
        "x + 3 + 4",
        "abs(-10)",
        "2 ** 3 + 2",
        "2.5 * 4",
        "(2 + 3",
        "20 // 2",
        "[2, 3, 4]",
        "True + 9",
        "",
        "ten",
        "2 * 3 + 4; 1",
        "lambda: 10",
        "+10",
        "2 * 3 + 4 == 10",
    ],
)
def test_unparsable_or_unsafe_answer_scores_zero(answer: str) -> None:
    assert score(f"<answer>{answer}</answer>") == 0.0


def test_no_answer_tag_scores_zero() -> None:
    assert score("the answer is 2 * 3 + 4") == 0.0
    assert score("<answer>2 * 3 + 4") == 0.0
    assert score("<answer>2 * 3 + 4</answer") == 0.0
    assert score("") == 0.0


def test_division_by_zero_scores_zero() -> None:
    assert score("<answer>2 / (4 - 4) + 3</answer>", {"target": 10, "numbers": [2, 3, 4, 4]}) == 0.0
    assert (
        score("<answer>2 * 3 + 4 + 0 * (4 / (3 - 3))</answer>", {"target": 10, "numbers": [2, 3, 4, 0, 4, 3, 3]}) == 0.0
    )


def test_last_answer_tag_wins() -> None:
    assert score("<answer>2 + 3 + 4</answer> no, <answer>2 * 3 + 4</answer>") == 1.0
    assert score("<answer>2 * 3 + 4</answer> no, <answer>2 + 3 + 4</answer>") == 0.1
    assert score("<answer>2 * 3 + 4</answer> or <answer>2 +</answer>") == 0.0


def test_numpy_ground_truth_from_parquet() -> None:
    gt = {"target": np.int64(10), "numbers": np.array([2, 3, 4])}
    assert score("<answer>2 * 3 + 4</answer>", gt) == 1.0
    assert score("<answer>2 + 3 + 4</answer>", gt) == 0.1


def test_registered_for_its_data_source() -> None:
    assert get_reward_score_fn(None, "countdown") == ("countdown", countdown.compute_score)
    assert get_reward_score_fn("countdown") == ("countdown", countdown.compute_score)


# ----------------------------------------------------------------------------- data script
def solve(numbers: list[int], target: int) -> str | None:
    """Brute force: an expression over ``numbers`` (each once) equal to ``target``, or None."""

    def search(items: list[tuple[Fraction, str]]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == target else None
        for i, j in combinations(range(len(items)), 2):
            rest = [items[k] for k in range(len(items)) if k not in (i, j)]
            (a, sa), (b, sb) = items[i], items[j]
            options = [
                (a + b, f"({sa} + {sb})"),
                (a * b, f"({sa} * {sb})"),
                (a - b, f"({sa} - {sb})"),
                (b - a, f"({sb} - {sa})"),
            ]
            options += [(a / b, f"({sa} / {sb})")] if b else []
            options += [(b / a, f"({sb} / {sa})")] if a else []
            for option in options:
                if (found := search(rest + [option])) is not None:
                    return found
        return None

    return search([(Fraction(x), str(x)) for x in numbers])


def test_brute_force_solver() -> None:
    assert solve([8, 3, 8, 3], 24) is not None
    assert solve([1, 1, 1], 100) is None
    expression = solve([3, 4, 6], 2)
    assert (
        expression is not None and score(f"<answer>{expression}</answer>", {"target": 2, "numbers": [3, 4, 6]}) == 1.0
    )


def load_script():
    spec = importlib.util.spec_from_file_location("make_countdown_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ARGS = ["--n_train", "30", "--n_dev", "8", "--n_test", "12", "--seed", "0"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("countdown")
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--out_dir", str(out), *ARGS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.splitlines() == [
        f"wrote {n} {split} tasks to {out / f'{split}.parquet'}"
        for split, n in (("train", 30), ("dev", 8), ("test", 12))
    ]
    return out


def test_script_import_has_no_side_effects(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    load_script()
    assert list(tmp_path.iterdir()) == [] and capsys.readouterr().out == ""


def test_files_columns_and_counts(data_dir: Path) -> None:
    for split, n in (("train", 30), ("dev", 8), ("test", 12)):
        frame = pd.read_parquet(data_dir / f"{split}.parquet")
        assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        assert len(frame) == n
        assert set(frame["data_source"]) == {"countdown"} and set(frame["ability"]) == {"arithmetic"}
        assert [e["index"] for e in frame["extra_info"]] == list(range(n))
        assert {e["split"] for e in frame["extra_info"]} == {split}
        for prompt, rm in zip(frame["prompt"], frame["reward_model"]):
            gt = rm["ground_truth"]
            numbers, target = [int(x) for x in gt["numbers"]], int(gt["target"])
            assert rm["style"] == "rule"
            assert len(numbers) in (3, 4) and all(1 <= x <= 20 for x in numbers) and 1 <= target <= 100
            assert len(prompt) == 1 and prompt[0]["role"] == "user"
            content = prompt[0]["content"]
            assert f"Using the numbers {numbers}, write an arithmetic expression that equals {target}." in content
            assert "<answer>(2 + 3) * 4</answer>" in content


def test_tasks_are_solvable(data_dir: Path) -> None:
    frame = pd.read_parquet(data_dir / "test.parquet")
    for rm in frame["reward_model"]:
        gt = rm["ground_truth"]  # numbers arrive as a numpy array, as in training
        expression = solve([int(x) for x in gt["numbers"]], int(gt["target"]))
        assert expression is not None, gt
        assert countdown.compute_score("countdown", f"<answer>{expression}</answer>", gt) == 1.0


def keys(path: Path) -> list[tuple[tuple[int, ...], int]]:
    frame = pd.read_parquet(path)
    return [
        (tuple(sorted(int(x) for x in rm["ground_truth"]["numbers"])), int(rm["ground_truth"]["target"]))
        for rm in frame["reward_model"]
    ]


def test_splits_are_disjoint(data_dir: Path) -> None:
    all_keys = [k for split in ("train", "dev", "test") for k in keys(data_dir / f"{split}.parquet")]
    assert len(all_keys) == 50 and len(set(all_keys)) == 50


def test_same_seed_same_files(data_dir: Path, tmp_path: Path, capsys) -> None:
    script = load_script()
    script.main(["--out_dir", str(tmp_path / "again"), *ARGS])
    script.main(["--out_dir", str(tmp_path / "other"), *ARGS[:-1], "1"])
    for split in ("train", "dev", "test"):
        assert (tmp_path / "again" / f"{split}.parquet").read_bytes() == (data_dir / f"{split}.parquet").read_bytes()
        assert keys(tmp_path / "other" / f"{split}.parquet") != keys(data_dir / f"{split}.parquet")
