"""The learned reward model: ranking figures, the score's way into the reward (hand-computed), the RM trainer's
pieces, the scoring pass (tree-packed = flat), the Ray worker, and the config checks."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from trainer_runs import grpo_step_args

from verl.protocol import DataProto
from verl.trainer.ppo.model_reward import apply_model_reward
from verl.trainer.ppo.reward import RewardManager
from verl.trainer.rm_trainer import layout_cost, plan_units, read_trajectories, same_task_pairs, unit_loss
from verl.utils.ranking import group_agreement, roc_auc
from verl.utils.typed_config import ConfigError, from_dict
from verl.workers.config import RewardModelConfig

# ----------------------------------------------------------------------------- ranking


def test_roc_auc_counts_pairs_and_half_ties():
    # positives 0.9, 0.4; negatives 0.4, 0.1: pairs (0.9>0.4) (0.9>0.1) (0.4=0.4: half) (0.4>0.1) -> 3.5 / 4
    assert roc_auc([0.9, 0.4, 0.4, 0.1], [True, True, False, False]) == 0.875
    assert roc_auc([0.1, 0.9], [True, False]) == 0.0
    assert roc_auc([0.5, 0.7], [True, True]) is None


def test_group_agreement_compares_within_groups_only():
    # group a: (outcome 1, score 0.8) vs (0, 0.3) agree; group b: (1, 0.2) vs (0, 0.6) disagree, (0, 0.6) vs (1, 0.9)
    # agree, (1, 0.2) vs (1, 0.9) is no pair; across groups nothing is compared
    scores = [0.8, 0.3, 0.2, 0.6, 0.9]
    outcomes = [1.0, 0.0, 1.0, 0.0, 1.0]
    assert group_agreement(scores, outcomes, ["a", "a", "b", "b", "b"]) == (2 / 3, 3)
    assert group_agreement([0.5, 0.5], [1.0, 0.0], ["a", "a"]) == (0.5, 1)
    assert group_agreement([0.5, 0.1], [1.0, 1.0], ["a", "a"]) == (None, 0)


# ----------------------------------------------------------------------------- the score in the reward


def scored_batch() -> tuple[DataProto, torch.Tensor]:
    """Row 0: two turns (model tokens 0-1 and 3), success, env reward 1; row 1: one turn (0-2), env reward 0; row 2
    failed. Scores r at the turn ends: row 0 r(1) = 0.5, r(3) = 2.0; row 1 r(2) = -1.0."""
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    batch = DataProto.from_dict(
        {"responses": torch.ones(3, 5, dtype=torch.long), "response_mask": mask},
        {
            "uid": ["g", "g", "h"],
            "failed": [False, False, True],
            "success": [True, False, False],
            "turn_ends": [[1, 3], [2], []],
            "error": ["", "", "env down"],
            "status": ["done", "done", "failed"],
        },
    )
    batch.batch["outcome_scores"] = torch.tensor([1.0, 0.0, 0.0])
    rm = torch.tensor([[9.0, 0.5, 9.0, 2.0, 0.0], [9.0, 9.0, -1.0, 0.0, 0.0], [0.0] * 5])
    return batch, rm


def rm_config(**kw) -> RewardModelConfig:
    return from_dict(RewardModelConfig, {"enable": True, "model": {"path": "unused"}, **kw}, "reward_model")


def test_replace_scores_each_trajectory_at_its_final_action():
    batch, rm = scored_batch()
    metrics = apply_model_reward(batch, rm, rm_config(transform="raw"), RewardManager(None))
    assert batch.batch["outcome_scores"].tolist() == [2.0, -1.0, 0.0]
    expected = torch.zeros(3, 5)
    expected[0, 3], expected[1, 2] = 2.0, -1.0  # last_token allocation: on the last model token
    assert torch.equal(batch.batch["token_level_scores"], expected)
    assert metrics == {
        "reward_model/failures": 0.0,
        "reward_model/score/mean": 0.5,
        "reward_model/score/std": 1.5,
        "reward_model/env_reward/mean": 0.5,
        "reward_model/env_success/mean": 0.5,
        "reward_model/auc": 1.0,
        "reward_model/agreement": 1.0,
        "reward_model/agreement_pairs": 1.0,
    }


def test_sigmoid_and_add_combine_with_the_env_reward():
    batch, rm = scored_batch()
    apply_model_reward(batch, rm, rm_config(), RewardManager(None))
    assert batch.batch["outcome_scores"].tolist() == pytest.approx(
        [1 / (1 + math.exp(-2.0)), 1 / (1 + math.exp(1.0)), 0.0]
    )
    batch, rm = scored_batch()
    apply_model_reward(batch, rm, rm_config(transform="raw", combine="add", weight=0.5), RewardManager(None))
    assert batch.batch["outcome_scores"].tolist() == [1.0 + 0.5 * 2.0, 0.0 + 0.5 * -1.0, 0.0]


def test_per_turn_pays_score_differences_that_sum_to_the_score():
    batch, rm = scored_batch()
    apply_model_reward(batch, rm, rm_config(transform="raw", per_turn=True), RewardManager(None))
    expected = torch.zeros(3, 5)
    expected[0, 1], expected[0, 3], expected[1, 2] = 0.5, 2.0 - 0.5, -1.0
    assert torch.equal(batch.batch["token_level_scores"], expected)
    assert batch.batch["outcome_scores"].tolist() == [2.0, -1.0, 0.0]
    batch, rm = (
        scored_batch()
    )  # add, weight 0.5: R_env on the last model token (allocation), plus 0.5 d_k at each turn end
    apply_model_reward(
        batch, rm, rm_config(transform="raw", per_turn=True, combine="add", weight=0.5), RewardManager(None)
    )
    expected = torch.zeros(3, 5)
    expected[0, 1], expected[0, 3], expected[1, 2] = 0.25, 1.0 + 0.75, -0.5
    assert torch.equal(batch.batch["token_level_scores"], expected)
    assert batch.batch["outcome_scores"].tolist() == [2.0, -0.5, 0.0]


def test_gigpo_step_rewards_follow_the_combination():
    batch, rm = scored_batch()
    batch.non_tensor_batch["step_reward"] = np.array([[0.3, 0.0], [0.0], []], dtype=object)
    apply_model_reward(batch, rm, rm_config(transform="raw"), RewardManager(None))  # replace: the env's are dropped
    assert list(batch.non_tensor_batch["step_reward"][:2]) == [[0.0, 0.0], [0.0]]
    batch, rm = scored_batch()
    batch.non_tensor_batch["step_reward"] = np.array([[0.3, 0.0], [0.0], []], dtype=object)
    apply_model_reward(
        batch, rm, rm_config(transform="raw", combine="add", weight=0.5, per_turn=True), RewardManager(None)
    )
    assert list(batch.non_tensor_batch["step_reward"][:2]) == [[0.3 + 0.25, 0.75], [-0.5]]


def test_a_non_finite_score_fails_its_row_and_is_counted():
    batch, rm = scored_batch()
    rm[1, 2] = float("nan")
    metrics = apply_model_reward(batch, rm, rm_config(transform="raw"), RewardManager(None))
    nt = batch.non_tensor_batch
    assert list(nt["failed"]) == [False, True, True] and nt["status"][1] == "failed"
    assert nt["error"][1].startswith("reward model: no finite score")
    assert batch.batch["response_mask"][1].sum() == 0 and batch.batch["outcome_scores"].tolist() == [2.0, 0.0, 0.0]
    assert metrics["reward_model/failures"] == 1.0 and metrics["reward_model/score/mean"] == 2.0
    assert "reward_model/auc" not in metrics and metrics["reward_model/agreement_pairs"] == 0.0


# ----------------------------------------------------------------------------- the RM trainer's pieces


def test_same_task_pairs_put_the_higher_reward_first():
    assert same_task_pairs([7, 7, 8, 7, 8], [0.5, 1.0, 0.0, 0.5, 0.0]) == [(1, 0), (1, 3)]


def test_unit_loss_is_bce_for_a_trajectory_and_bradley_terry_for_a_pair():
    scores = torch.tensor([2.0, -1.0, 0.5])
    success = np.array([True, False, False])
    bce = math.log(1 + math.exp(-2.0)) + math.log(1 + math.exp(-1.0))  # -log sigmoid(2) - log(1 - sigmoid(-1))
    assert unit_loss(scores, [[0], [1]], success).item() == pytest.approx(bce, rel=1e-6)
    assert unit_loss(scores, [[0, 2]], success).item() == pytest.approx(math.log(1 + math.exp(-1.5)), rel=1e-6)


def test_micro_batches_keep_pairs_whole_and_pack_shared_prompts():
    prompt = list(range(100, 140))
    ids = [prompt + [1, 2], prompt + [3], prompt + [4, 5, 6], list(range(10))]
    assert layout_cost(ids[:3], "off") == (3 * 43, False)
    assert layout_cost(ids[:3], "auto") == (40 + 2 + 1 + 3, True)  # the prompt once
    assert layout_cost([ids[3]], "auto") == (10, False)  # nothing shared: padding costs nothing either
    # budget 50: the pair [0, 1] fits packed (43 tokens), adding [2] (46) still fits, [3] does not
    assert plan_units([[0, 1], [2], [3]], ids, 50, "auto") == [([0, 1, 2], True), ([3], False)]
    assert plan_units([[0, 1], [2]], ids, 50, "off") == [([0, 1], False), ([2], False)]


def test_read_trajectories_scores_at_the_last_turn_and_drops_what_it_cannot_use(tmp_path):
    frame = pd.DataFrame(
        {
            "task_id": [1, 1, 2],
            "input_ids": [[5, 6, 7, 8], [5, 6, 9], list(range(50))],
            "turn_ends": [[1, 3], [], [40]],
            "success": [True, False, False],
            "env_reward": [1.0, 0.0, 0.0],
        }
    )
    frame.to_parquet(tmp_path / "t.parquet")
    data, dropped = read_trajectories(str(tmp_path / "t.parquet"), max_length=10)
    assert dropped == 2 and data.ids == [[5, 6, 7, 8]] and data.score_at == [3] and data.success.tolist() == [True]


# ----------------------------------------------------------------------------- the model and its worker


@pytest.fixture(scope="module")
def tiny_rm_path(tiny_model_path, tmp_path_factory) -> str:
    """A reward-model folder: the tiny Llama with a fresh scalar head (seed 0)."""
    from verl.trainer.rm_trainer import export_reward_model
    from verl.workers.reward_model import load_score_model

    torch.manual_seed(0)
    module = load_score_model(tiny_model_path)
    module.config.architectures = [type(module).__name__]
    folder = tmp_path_factory.mktemp("tiny_rm") / "rm"
    export_reward_model(dict(module.state_dict()), module.config, tiny_model_path, folder)
    return str(folder)


def test_tree_packed_scores_equal_the_flat_ones(tiny_rm_path):
    from verl.utils.prefix_tree import use_tree_attention
    from verl.workers.reward_model import load_score_model, position_scores

    module = load_score_model(tiny_rm_path).eval()
    ids = torch.tensor([[0, 0, 11, 12, 13, 14, 15], [0, 11, 12, 13, 16, 17, 18], [11, 12, 13, 14, 15, 19, 20]])
    mask = (ids != 0).long()
    with torch.no_grad():
        flat = position_scores(module, ids, mask)
        use_tree_attention(module)
        packed = position_scores(module, ids, mask, tree_packed=True)
    assert flat.shape == (3, 7) and flat[0, :2].tolist() == [0.0, 0.0]
    assert torch.allclose(flat, packed, atol=1e-5)
    assert flat[0, 2:].tolist() == pytest.approx(flat[2, :5].tolist(), abs=1e-5)  # same prefix, same scores


def test_reward_model_problem_names_a_causal_lm(tiny_model_path, tiny_rm_path):
    from verl.workers.reward_model import reward_model_problem

    assert reward_model_problem(tiny_rm_path) is None
    assert "LlamaForCausalLM with 1 label(s), not a reward model" in reward_model_problem(tiny_model_path)
    assert "no config.json" in reward_model_problem("/nonexistent")


def test_the_worker_scores_every_response_position(ray_local, tiny_rm_path):
    from test_workers import close_group, group, training_batch

    from verl.workers.reward_model import RewardModelWorker, load_score_model, position_scores

    wg, pool = group(
        RewardModelWorker,
        1,
        config={"model": {"path": tiny_rm_path}, "dtype": "float32", "num_threads": 1, "device": "cpu"},
    )
    try:
        wg.init_model()
        data = training_batch(4)
        out = wg.compute_rm_score(data)
    finally:
        close_group(wg, pool)
    with torch.no_grad():
        full = position_scores(
            load_score_model(tiny_rm_path).eval(), data.batch["input_ids"], data.batch["attention_mask"]
        )
    T = data.batch["responses"].shape[1]
    assert torch.allclose(out.batch["rm_scores"], full[:, -T:], atol=1e-5)
    assert out.meta_info["metrics"]["timing_s/reward_model"] > 0


# ----------------------------------------------------------------------------- config


def test_reward_model_settings_are_checked_before_any_work(tiny_model_path):
    with pytest.raises(ConfigError, match=r"reward_model.combine must be one of \['replace', 'add'\], got 'mean'"):
        rm_config(combine="mean")
    with pytest.raises(ConfigError, match="reward_model.transform must be one of"):
        rm_config(transform="tanh")


def test_the_trainer_config_rejects_a_causal_lm_as_reward_model(tiny_model_path, countdown_data, tmp_path):
    from verl.trainer.ppo.config import load_config

    base = grpo_step_args(tiny_model_path, countdown_data, tmp_path, "single_turn", "reward_model.enable=true")
    with pytest.raises(ConfigError, match=r"reward_model.model.path: .* not a reward model"):
        load_config([*base, f"reward_model.model.path={tiny_model_path}"])
    with pytest.raises(ConfigError, match=r"reward_model.model.path: '' is not a Hugging Face model folder"):
        load_config(base)
