"""The one reward path (`RewardManager`): allocation by hand, dataset columns reaching reward modules,
failing and hanging modules failing their rows, single-turn success, and the score every estimator sees."""

import time

import numpy as np
import pytest
import torch

from verl.trainer.ppo.reward import RewardManager, allocate
from verl.utils.batch import packed_proto
from verl.utils.reward_score import SUPPORTED_REWARD_SCORE_FNS, register_reward_score

# Three rows, width 8.  Row 0: model tokens at 0,1 (turn 1) and 4,5,6 (turn 2).
# Row 1: model tokens at 0,1,2 (one turn).  Row 2: one model token per turn at 0, 2, 4.
MASKS = [[1, 1, 0, 0, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0, 0, 0], [1, 0, 1, 0, 1, 0, 0, 0]]
ENDS = [[1, 6], [2], [0, 2, 4]]
REWARDS = [2.0, -1.0, 3.0]


def test_allocate_last_token():
    expected = torch.tensor(
        [
            [0, 0, 0, 0, 0, 0, 2.0, 0],  # R on the last model token (6)
            [0, 0, -1.0, 0, 0, 0, 0, 0],  # (2)
            [0, 0, 0, 0, 3.0, 0, 0, 0],  # (4)
        ]
    )
    assert torch.equal(allocate("last_token", REWARDS, MASKS, ENDS, 8), expected)


def test_allocate_uniform_positive():
    expected = torch.tensor(
        [
            [0.4, 0.4, 0, 0, 0.4, 0.4, 0.4, 0],  # 2.0 / 5 model tokens
            [0, 0, -1.0, 0, 0, 0, 0, 0],  # negative: all on the last model token
            [1.0, 0, 1.0, 0, 1.0, 0, 0, 0],  # 3.0 / 3
        ]
    )
    assert torch.allclose(allocate("uniform_positive", REWARDS, MASKS, ENDS, 8), expected)
    assert allocate("uniform_positive", REWARDS, MASKS, ENDS, 8).sum(1).tolist() == pytest.approx(REWARDS)


def test_allocate_discounted():
    expected = torch.tensor(
        [
            [0, 1.0, 0, 0, 0, 0, 2.0, 0],  # gamma^1 * 2 at end of turn 1, 2 at end of turn 2
            [0, 0, -1.0, 0, 0, 0, 0, 0],  # one turn: gamma^0 * R
            [0.75, 0, 1.5, 0, 3.0, 0, 0, 0],  # 0.5^2 * 3, 0.5 * 3, 3
        ]
    )
    assert torch.allclose(allocate("discounted", REWARDS, MASKS, ENDS, 8, gamma=0.5), expected)


def test_allocate_skips_rows_without_model_tokens_and_rejects_unknown():
    scores = allocate("last_token", [5.0], [[0, 0, 0]], [[]], 4)
    assert torch.equal(scores, torch.zeros(1, 4))
    with pytest.raises(ValueError, match="unknown reward allocation 'sparse'"):
        allocate("sparse", [1.0], [[1]], [[0]], 1)


class WordTokenizer:
    """Decodes ids as space-joined words w<id>: enough for the reward path's solution text."""

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(f"w{i}" for i in ids)


def rows(**columns):
    """Two single-turn rows (responses [5, 6] and [7]) with the given non-tensor columns."""
    d = packed_proto([[1, 2], [3]], [[5, 6], [7]], pad_id=0)
    for key, values in columns.items():
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        d.non_tensor_batch[key] = arr
    return d


@pytest.fixture
def reward_fn():
    """Registers a reward module for the duration of a test; yields a function that registers one."""
    added = []

    def add(name, fn):
        register_reward_score(name, fn, data_sources=(name,))
        added.append(name)

    yield add
    from verl.utils.reward_score import DATA_SOURCE_TO_FN

    for name in added:
        SUPPORTED_REWARD_SCORE_FNS.pop(name)
        DATA_SOURCE_TO_FN.pop(name)


def test_dataset_columns_reach_the_reward_module(reward_fn):
    seen = []

    def needs_ground_truth(data_source, solution_str, ground_truth, extra_info=None):
        seen.append((data_source, solution_str, ground_truth, extra_info))
        return {"score": float(solution_str == ground_truth["answer"]), "length": len(solution_str)}

    reward_fn("t_gt", needs_ground_truth)
    d = rows(
        data_source=["t_gt", "t_gt"],
        reward_model=[{"ground_truth": {"answer": "w5 w6"}}, {"ground_truth": {"answer": "w8"}}],
        extra_info=[{"split": "train", "level": 2}, {"split": "train"}],
    )
    metrics = RewardManager(WordTokenizer())(d)
    assert seen == [
        ("t_gt", "w5 w6", {"answer": "w5 w6"}, {"split": "train", "level": 2}),
        ("t_gt", "w7", {"answer": "w8"}, {"split": "train"}),
    ]
    assert d.batch["outcome_scores"].tolist() == [1.0, 0.0]
    assert d.batch["token_level_scores"].tolist() == [[0.0, 1.0], [0.0, 0.0]]  # last_token: R on the last model token
    assert list(d.non_tensor_batch["success"]) == [True, False]  # no env verdict: full marks count as success
    assert metrics == {"reward/t_gt/mean": 0.5, "reward/t_gt/length/mean": 3.5, "reward/errors": 0.0}


def test_a_failing_or_hanging_reward_module_fails_its_row(reward_fn):
    def picky(data_source, solution_str, ground_truth, extra_info=None):
        if solution_str == "w7":
            raise KeyError("no rule for w7")
        return 0.5

    def hangs(data_source, solution_str, ground_truth, extra_info=None):
        if solution_str == "w7":
            time.sleep(30)
        return 0.25

    reward_fn("t_picky", picky)
    reward_fn("t_hangs", hangs)
    for name, error in (
        ("t_picky", "reward 't_picky' failed: KeyError: 'no rule for w7'"),
        ("t_hangs", "reward 't_hangs' failed: timed out after 0.2 s"),
    ):
        d = rows(data_source=[name, name], status=["done", "done"], error=["", ""])
        start = time.perf_counter()
        metrics = RewardManager(WordTokenizer(), timeout_s=0.2)(d)
        assert time.perf_counter() - start < 5
        nt = d.non_tensor_batch
        assert list(nt["failed"]) == [False, True] and list(nt["status"]) == ["done", "failed"]
        assert nt["error"][1] == error
        assert d.batch["response_mask"][1].tolist() == [0, 0]  # out of every loss and metric
        assert d.batch["outcome_scores"][1].item() == 0.0 and metrics["reward/errors"] == 1.0


def test_already_failed_rows_are_not_scored(reward_fn):
    calls = []
    reward_fn("t_count", lambda *args: calls.append(args) or 1.0)
    d = rows(data_source=["t_count", "t_count"], failed=[True, False])
    d.batch["response_mask"][0] = 0
    RewardManager(WordTokenizer())(d)
    assert len(calls) == 1 and d.batch["outcome_scores"].tolist() == [0.0, 1.0]


def test_every_module_in_the_folder_registers_itself():
    """Importing the registry alone imports each module under verl/utils/reward_score/, whose decorator is its
    only registration: the engine's built-ins and the episode reward every env uses by default."""
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import verl.utils.reward_score as r; print(sorted(r.SUPPORTED_REWARD_SCORE_FNS)); "
            "print(sorted(r.DATA_SOURCE_TO_FN.items()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == ["['countdown', 'episode', 'exact_match']", "[('countdown', 'countdown')]"]


def test_register_decorator_adds_a_module_and_its_data_sources():
    from verl.utils.reward_score import DATA_SOURCE_TO_FN, get_reward_score_fn, register

    @register("t_decorated", data_sources=("t_decorated_source",))
    def compute_score(data_source, solution_str, ground_truth, extra_info=None):
        return 0.5

    try:
        assert get_reward_score_fn(None, "t_decorated_source") == ("t_decorated", compute_score)
        with pytest.raises(ValueError, match="reward score 't_decorated' is already registered"):
            register("t_decorated")(lambda *a, **k: 1.0)
    finally:
        SUPPORTED_REWARD_SCORE_FNS.pop("t_decorated")
        DATA_SOURCE_TO_FN.pop("t_decorated_source")
