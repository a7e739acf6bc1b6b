"""core_algos against hand-computed values (the arithmetic is written next to each case)."""

import math

import numpy as np
import pytest
import torch

from verl import core_algos as ca
from verl.protocol import DataProto

f64 = dict(dtype=torch.float64)


def close(actual, expected, atol=1e-9):
    torch.testing.assert_close(torch.as_tensor(actual, **f64), torch.as_tensor(expected, **f64), atol=atol, rtol=0)


def stdev_unbiased(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


# ----------------------------------------------------------------- masked statistics


def test_masked_mean_var_whiten():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], **f64)
    m = torch.tensor([1.0, 1.0, 1.0, 0.0], **f64)
    close(ca.masked_mean(x, m), 2.0)  # (1+2+3)/3
    close(ca.masked_var(x, m, unbiased=False), 2.0 / 3.0)  # (1+0+1)/3
    close(ca.masked_var(x, m), 1.0)  # (2/3) * 3/2
    # (x - 2) / sqrt(1 + 1e-8); the masked element is transformed too (callers multiply by the mask)
    close(ca.masked_whiten(x, m), torch.tensor([-1.0, 0.0, 1.0, 2.0], **f64) / math.sqrt(1 + 1e-8))
    close(
        ca.masked_whiten(x, m, shift_mean=False), torch.tensor([-1.0, 0.0, 1.0, 2.0], **f64) / math.sqrt(1 + 1e-8) + 2.0
    )


def test_masked_mean_per_row_and_empty_mask():
    x = torch.tensor([[1.0, 3.0], [5.0, 7.0]], **f64)
    m = torch.tensor([[1.0, 1.0], [0.0, 0.0]], **f64)
    close(ca.masked_mean(x, m, axis=-1), [2.0, 0.0])  # row 2 has no tokens: 0, not nan


def test_masked_var_needs_two_elements():
    with pytest.raises(ValueError, match="at least 2"):
        ca.masked_var(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0]))


# ----------------------------------------------------------------- GAE


def test_gae_single_turn():
    r = torch.tensor([[0.0, 0.0, 1.0]], **f64)
    v = torch.tensor([[0.5, 0.6, 0.7]], **f64)
    m = torch.ones(1, 3, **f64)
    adv, ret = ca.compute_gae_advantage_return(r, v, m, gamma=0.9, lam=0.8)
    # t=2: delta = 1 + 0 - 0.7 = 0.3;           A2 = 0.3
    # t=1: delta = 0 + 0.9*0.7 - 0.6 = 0.03;     A1 = 0.03 + 0.72*0.3 = 0.246
    # t=0: delta = 0 + 0.9*0.6 - 0.5 = 0.04;     A0 = 0.04 + 0.72*0.246 = 0.21712
    raw = [0.21712, 0.246, 0.3]
    close(ret, [[0.71712, 0.846, 1.0]])  # raw + values
    mean, std = sum(raw) / 3, stdev_unbiased(raw)
    expected = [(a - mean) / math.sqrt(std**2 + 1e-8) for a in raw]
    close(adv, [expected])


def test_gae_multi_turn_skips_observation_gap():
    # model tokens 0,1 | observation tokens 2,3 (mask 0, junk values) | model token 4
    r = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]], **f64)
    v = torch.tensor([[0.1, 0.2, 9.0, 9.0, 0.4]], **f64)
    m = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0]], **f64)
    adv, ret = ca.compute_gae_advantage_return(r, v, m, gamma=0.5, lam=0.5)
    # t=4: delta = 1 - 0.4 = 0.6; g = 0.6 -> nextvalues 0.4, lastgaelam 0.6;  A4 = 0.6
    # t=3,2: masked, both carry over;                                         A3 = A2 = 0.6
    # t=1: delta = 0 + 0.5*0.4 - 0.2 = 0; g = 0 + 0.25*0.6 = 0.15;             A1 = 0.15
    # t=0: delta = 0 + 0.5*0.2 - 0.1 = 0; g = 0 + 0.25*0.15 = 0.0375;          A0 = 0.0375
    close(ret, [[0.0375 + 0.1, 0.15 + 0.2, 0.6 + 9.0, 0.6 + 9.0, 0.6 + 0.4]])
    # whiten over {0.0375, 0.15, 0.6}: mean 0.2625, unbiased var 0.1771875/2 = 0.08859375
    s = math.sqrt(0.08859375 + 1e-8)
    close(adv, [[-0.225 / s, -0.1125 / s, 0.0, 0.0, 0.3375 / s]])


# ----------------------------------------------------------------- outcome estimators

INDEX = np.array(["a", "a", "a", "b"], dtype=object)
REWARDS = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.25, 0.25], [0.0, 2.0]], **f64)  # row sums 1, 0, 0.5, 2
MASK = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]], **f64)


def test_grpo_normalised():
    metrics = {}
    adv, ret = ca.compute_grpo_outcome_advantage(REWARDS, MASK, INDEX, metrics=metrics)
    # group a: scores 1, 0, 0.5 -> mean 0.5, unbiased std sqrt(0.5/2) = 0.5
    # group b: one row -> no baseline -> advantage 0
    eps = 1e-6
    per_row = [0.5 / (0.5 + eps), -0.5 / (0.5 + eps), 0.0, 0.0]
    expected = torch.tensor(per_row, **f64).unsqueeze(-1) * MASK
    close(adv, expected)
    assert ret is adv
    assert metrics == {"adv/no_baseline_rows": 1.0, "adv/equal_score_group_share": 0.0}


def test_outcome_score_is_the_trajectory_reward_whatever_the_allocation():
    # two 2-turn trajectories of one task, discounted allocation (gamma 0.5): token sums 1.5 and 0, but R = 1 and 0
    r = torch.tensor([[0.5, 0.0, 1.0], [0.0, 0.0, 0.0]], **f64)
    m = torch.tensor([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]], **f64)
    idx = np.array(["t", "t"], dtype=object)
    scores = torch.tensor([1.0, 0.0], **f64)
    adv, _ = ca.compute_grpo_outcome_advantage(r, m, idx, scores=scores, norm_adv_by_std_in_grpo=False)
    close(adv, [[0.5, 0.0, 0.5], [-0.5, 0.0, -0.5]])  # R - mean(1, 0); the token sums would give +-0.75
    adv, _ = ca.compute_rloo_outcome_advantage(r, m, idx, scores=scores)
    close(adv, [[1.0, 0.0, 1.0], [-1.0, 0.0, -1.0]])  # 1 - 0, 0 - 1


def test_failed_rows_take_no_part_in_groups_and_equal_groups_are_counted():
    # group a: rows 0, 1 live with equal scores 1, 1; row 2 failed (no model token); group b: rows 3, 4 with 0 and 2
    r = torch.tensor([[1.0], [1.0], [5.0], [0.0], [2.0]], **f64)
    m = torch.tensor([[1.0], [1.0], [0.0], [1.0], [1.0]], **f64)
    idx = np.array(["a", "a", "a", "b", "b"], dtype=object)
    metrics = {}
    adv, _ = ca.compute_grpo_outcome_advantage(r, m, idx, metrics=metrics, norm_adv_by_std_in_grpo=False)
    close(adv, [[0.0], [0.0], [0.0], [-1.0], [1.0]])  # the failed row's 5 does not move group a's mean
    assert metrics == {"adv/no_baseline_rows": 0.0, "adv/equal_score_group_share": 0.5}


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "gigpo"])
def test_every_group_estimator_logs_the_equal_score_group_share(name):
    # groups a: 1, 1 (equal); b: 0, 2; c: 0.5, 0.5, 0.5 (equal); d: 3 alone (not a group of two or more);
    # e: 4, 4 with the second row failed (no model token), so e is a group of one -> 2 equal of 3 groups
    scores = [1.0, 1.0, 0.0, 2.0, 0.5, 0.5, 0.5, 3.0, 4.0, 4.0]
    idx = np.array(["a", "a", "b", "b", "c", "c", "c", "d", "e", "e"], dtype=object)
    m = torch.ones(10, 2, **f64)
    m[9] = 0.0
    # GiGPO groups trajectories: one one-step trajectory per row, each at its own state
    nt = {
        "traj_uid": np.arange(10).astype(object),
        "step": np.zeros(10, dtype=object),
        "anchor_obs": np.arange(10).astype(object),
    }
    metrics = {}
    ca.get_estimator(name).fn(
        token_level_rewards=torch.zeros(10, 2, **f64),
        response_mask=m,
        index=idx,
        scores=torch.tensor(scores, **f64),
        non_tensor_batch=nt,
        metrics=metrics,
    )
    assert metrics["adv/equal_score_group_share"] == 2 / 3
    assert ca.equal_score_group_share([[1.0, 1.0], [0.0, 2.0], [0.5, 0.5, 0.5], [3.0]]) == 2 / 3
    assert ca.equal_score_group_share([[3.0], []]) == 0.0


def test_dr_grpo_does_not_divide_by_std():
    adv, _ = ca.compute_grpo_outcome_advantage(REWARDS, MASK, INDEX, norm_adv_by_std_in_grpo=False)
    close(adv, torch.tensor([0.5, -0.5, 0.0, 0.0], **f64).unsqueeze(-1) * MASK)  # score - group mean; b alone: 0
    adv2, _ = ca.get_estimator("dr_grpo").fn(token_level_rewards=REWARDS, response_mask=MASK, index=INDEX)
    close(adv2, adv)


def test_rloo():
    metrics = {}
    adv, _ = ca.compute_rloo_outcome_advantage(REWARDS, MASK, INDEX, metrics=metrics)
    # group a (n=3): s*3/2 - mean*3/2 with mean 0.5: 1.5-0.75, 0-0.75, 0.75-0.75 (= s minus mean of the others)
    # group b (n=1): no baseline -> 0
    close(adv, torch.tensor([0.75, -0.75, 0.0, 0.0], **f64).unsqueeze(-1) * MASK)
    assert metrics["adv/no_baseline_rows"] == 1.0


def test_reinforce_plus_plus_carries_the_return_across_observations():
    # turn 1: tokens 0-1, observation: tokens 2-3 (mask 0), turn 2: token 4 with the outcome reward 1
    r = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]], **f64)
    m = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0]], **f64)
    adv, ret = ca.compute_reinforce_plus_plus_outcome_advantage(r, m, gamma=0.5)
    # t=4: G = 1; t=3, t=2 (observation): neither reset nor discount -> 1, 1
    # t=1: 0 + 0.5 * 1 = 0.5; t=0: 0 + 0.5 * 0.5 = 0.25
    close(ret, [[0.25, 0.5, 1.0, 1.0, 1.0]])
    # whiten over {0.25, 0.5, 1}: mean 7/12; unbiased var ((1/3)^2 + (1/12)^2 + (5/12)^2) / 2 = 7/48
    s = math.sqrt(7 / 48 + 1e-8)
    close(adv, [[-(1 / 3) / s, -(1 / 12) / s, 0.0, 0.0, (5 / 12) / s]])


def test_remax():
    r = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], **f64)
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], **f64)
    adv, ret = ca.compute_remax_outcome_advantage(r, torch.tensor([0.5, 0.25], **f64), m)
    close(ret, [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # outcome score (row sum 1) on every model token
    close(adv, [[0.5, 0.5, 0.5], [0.75, 0.75, 0.0]])  # (s - b) * m
    # discounted allocation over two turns (token sum 1.5) with R = 1: the score, not the sum, is compared to b
    adv, _ = ca.compute_remax_outcome_advantage(
        torch.tensor([[0.5, 0.0, 1.0]], **f64),
        torch.tensor([0.5], **f64),
        torch.ones(1, 3, **f64),
        scores=torch.tensor([1.0], **f64),
    )
    close(adv, [[0.5, 0.5, 0.5]])


def test_registry():
    assert {"gae", "grpo", "dr_grpo", "rloo", "reinforce_plus_plus", "remax"} <= set(ca.ESTIMATORS)
    assert {name for name, est in ca.ESTIMATORS.items() if est.needs_critic} == {"gae"}
    assert ca.group_estimators() == ["grpo", "dr_grpo", "rloo", "gigpo"]
    assert {name: est.loss_agg_mode for name, est in ca.ESTIMATORS.items() if est.loss_agg_mode != "token-mean"} == {
        "dr_grpo": "seq-mean-token-sum-norm"
    }
    assert {name for name, est in ca.ESTIMATORS.items() if est.check} == {"gigpo"}
    assert {name for name, est in ca.ESTIMATORS.items() if est.greedy_baseline} == {"remax"}
    assert {name: est.options.__name__ for name, est in ca.ESTIMATORS.items() if est.options} == {
        "gigpo": "GiGPOOptions"
    }
    with pytest.raises(ValueError, match=r"unknown advantage estimator 'nope'; known: \['dr_grpo', 'gae'"):
        ca.get_estimator("nope")
    with pytest.raises(ValueError, match=r"estimator 'bad': loss_agg_mode must be one of"):
        ca.register_adv_est("bad", loss_agg_mode="sum")
    with pytest.raises(ValueError, match=r"estimator 'bad': options must be a dataclass, got <class 'dict'>"):
        ca.register_adv_est("bad", options=dict)
    assert ca.load_estimator("grpo") == "grpo"
    with pytest.raises(ValueError, match=r"advantage estimator 'no_such_module:x' cannot be loaded: No module named"):
        ca.load_estimator("no_such_module:x")
    with pytest.raises(ValueError, match=r"'verl.core_algos:nope': verl.core_algos registers no estimator named"):
        ca.load_estimator("verl.core_algos:nope")

    @ca.register_adv_est("test_constant_one")
    def constant(token_level_rewards, response_mask, **kwargs):
        return response_mask.clone(), response_mask.clone()

    try:
        fn = ca.get_estimator("test_constant_one").fn
        adv, _ = fn(token_level_rewards=REWARDS, response_mask=MASK, index=INDEX, gamma=1.0, lam=1.0, values=None)
        close(adv, MASK)
        with pytest.raises(ValueError, match="already registered"):
            ca.register_adv_est("test_constant_one")(lambda **kw: None)
    finally:
        ca.ESTIMATORS.pop("test_constant_one")


# ----------------------------------------------------------------- KL


def test_kl_penalty_variants():
    lp = torch.tensor([-1.0, -2.0], **f64)
    ref = torch.tensor([-1.5, -1.0], **f64)
    close(ca.kl_penalty(lp, ref, "kl"), [0.5, -1.0])
    close(ca.kl_penalty(lp, ref, "k1"), [0.5, -1.0])
    close(ca.kl_penalty(lp, ref, "abs"), [0.5, 1.0])
    close(ca.kl_penalty(lp, ref, "mse"), [0.125, 0.5])  # 0.5 * 0.25, 0.5 * 1
    close(ca.kl_penalty(lp, ref, "k2"), [0.125, 0.5])
    # d = ref - lp = [-0.5, 1.0]: exp(-0.5) + 0.5 - 1, exp(1) - 1 - 1
    k3 = [math.exp(-0.5) - 0.5, math.e - 2.0]
    close(ca.kl_penalty(lp, ref, "low_var_kl"), k3)
    close(ca.kl_penalty(lp, ref, "k3"), k3)
    # d = 20: exp(20) - 21 is clamped to 10
    close(ca.kl_penalty(torch.tensor([0.0], **f64), torch.tensor([20.0], **f64), "k3"), [10.0])
    with pytest.raises(ValueError, match="unknown kl_penalty 'full'"):
        ca.kl_penalty(lp, ref, "full")


def test_kl_controllers():
    fixed = ca.FixedKLController(0.3)
    fixed.update(5.0, 100)
    assert fixed.value == 0.3
    ctl = ca.AdaptiveKLController(init_kl_coef=0.1, target_kl=0.05, horizon=100)
    ctl.update(current_kl=0.1, n_steps=10)  # e = clip(0.1/0.05 - 1, ±0.2) = 0.2; *= 1 + 0.2*10/100
    assert ctl.value == pytest.approx(0.102, abs=1e-12)
    ctl.update(current_kl=0.04, n_steps=50)  # e = 0.8 - 1 = -0.2; *= 1 - 0.2*50/100 = 0.9
    assert ctl.value == pytest.approx(0.0918, abs=1e-12)


def test_kl_reward():
    data = DataProto.from_dict(
        {
            "token_level_scores": torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], **f64),
            "old_log_probs": torch.tensor([[-1.0, -1.0, -1.0], [-2.0, -2.0, -2.0]], **f64),
            "ref_log_prob": torch.tensor([[-1.5, -1.0, -1.0], [-1.0, -2.0, -2.0]], **f64),
            "response_mask": torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], **f64),
        }
    )
    ctl = ca.FixedKLController(0.1)
    penalty, metrics = ca.kl_reward(data, ctl, "kl")
    # kl = (lp - ref) * mask = [[0.5, 0, 0], [-1, 0, 0]]; the term is -0.1 * kl, and rewards = scores + term
    close(penalty, [[-0.05, 0.0, 0.0], [0.1, 0.0, 0.0]])
    close(data.batch["token_level_scores"] + penalty, [[-0.05, 0.0, 1.0], [0.1, 1.0, 0.0]])
    assert "token_level_rewards" not in data.batch  # the term is its own input, nothing is rewritten
    # row means 0.5/3 and -1/2, averaged
    assert metrics["actor/reward_kl_penalty"] == pytest.approx((0.5 / 3 - 0.5) / 2, abs=1e-12)
    assert metrics["actor/reward_kl_penalty_coeff"] == 0.1


def test_kl_reward_leaves_failed_rows_out_of_the_metric():
    data = DataProto.from_dict(
        {
            "token_level_scores": torch.zeros(2, 2, **f64),
            "old_log_probs": torch.tensor([[-1.0, -1.0], [0.0, 0.0]], **f64),
            "ref_log_prob": torch.tensor([[-1.5, -1.5], [0.0, 0.0]], **f64),
            "response_mask": torch.tensor([[1.0, 1.0], [0.0, 0.0]], **f64),  # row 1 failed
        }
    )
    ctl = ca.AdaptiveKLController(init_kl_coef=0.1, target_kl=0.25, horizon=10)
    _, metrics = ca.kl_reward(data, ctl, "kl")
    assert metrics["actor/reward_kl_penalty"] == pytest.approx(
        0.5, abs=1e-12
    )  # row 0 only; with row 1 it would be 0.25
    assert ctl.value == pytest.approx(0.1 * (1 + 0.2 * 1 / 10), abs=1e-12)  # e = clip(0.5/0.25 - 1) = 0.2, one live row


# ----------------------------------------------------------------- losses

L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], **f64)
LM = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], **f64)


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", 10.0 / 4.0),  # (1+2+3+4) / 4 tokens
        ("seq-mean-token-sum", 5.0),  # (6 + 4) / 2 rows
        ("seq-mean-token-mean", 3.0),  # (6/3 + 4/1) / 2 rows
        ("seq-mean-token-sum-norm", 10.0 / 6.0),  # (6/3 + 4/3) / 2 rows, with C = T = 3
    ],
)
def test_agg_loss(mode, expected):
    close(ca.agg_loss(L, LM, mode), expected)


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", 10.0 / 4.0),
        ("seq-mean-token-sum", 5.0),  # (6 + 4) / 2 live rows, not / 3
        ("seq-mean-token-mean", 3.0),
        ("seq-mean-token-sum-norm", (6.0 / 8.0 + 4.0 / 8.0) / 2),  # constant C = 8 (the budget), 2 live rows
    ],
)
def test_agg_loss_failed_rows_count_in_no_denominator(mode, expected):
    loss = torch.cat([L, torch.full((1, 3), 7.0, **f64)])
    mask = torch.cat([LM, torch.zeros(1, 3, **f64)])  # a failed row: no model token
    close(ca.agg_loss(loss, mask, mode, loss_scale_factor=8.0), expected)


def test_agg_loss_unknown_mode():
    with pytest.raises(ValueError, match="unknown loss_agg_mode 'sum'"):
        ca.agg_loss(L, LM, "sum")


def test_seq_mean_token_mean_skips_rows_without_tokens():
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]], **f64)
    close(ca.agg_loss(L, mask, "seq-mean-token-mean"), 2.0)  # only row 1: 6/3


def _policy_case():
    old = torch.zeros(1, 4, **f64)
    lp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 4.0]], **f64))
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]], **f64)
    return old, lp, adv


def test_policy_loss_clip_and_dual_clip():
    old, lp, adv = _policy_case()
    mask = torch.ones(1, 4, **f64)
    loss, clipfrac, ppo_kl, clipfrac_lower = ca.compute_policy_loss(old, lp, adv, mask, cliprange=0.2)
    # t0: ratio 1.5, A=+1: l1=-1.5, l2=-1.2 -> max -1.2 (clipped)
    # t1: ratio 0.5, A=+1: l1=-0.5, l2=-0.8 -> -0.5
    # t2: ratio 1.1, A=-1: l1=l2=1.1 -> 1.1; dual min(3, 1.1) = 1.1
    # t3: ratio 4.0, A=-1: l1=4, l2=1.2 -> 4; dual min(3, 4) = 3 (dual clip active)
    close(loss, (-1.2 - 0.5 + 1.1 + 3.0) / 4)
    close(clipfrac, 0.25)
    close(clipfrac_lower, 0.25)
    close(ppo_kl, -math.log(1.5 * 0.5 * 1.1 * 4.0) / 4)  # mean(old - lp)


def test_policy_loss_mask_and_asymmetric_clip():
    old, lp, adv = _policy_case()
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0]], **f64)
    loss, clipfrac, _, _ = ca.compute_policy_loss(old, lp, adv, mask, cliprange=0.2)
    close(loss, (-1.2 + 1.1 + 3.0) / 3)
    close(clipfrac, 1.0 / 3.0)
    # clip-higher: 1 + 0.6 bound -> t0 ratio 1.5 is inside: l2 = l1 = -1.5, nothing clipped at t0
    loss, clipfrac, _, _ = ca.compute_policy_loss(
        old, lp, adv, mask, cliprange=0.2, cliprange_low=0.2, cliprange_high=0.6
    )
    close(loss, (-1.5 + 1.1 + 3.0) / 3)
    close(clipfrac, 0.0)


def test_policy_loss_seq_mean_token_sum():
    old, lp, adv = _policy_case()
    loss, *_ = ca.compute_policy_loss(
        old, lp, adv, torch.ones(1, 4, **f64), cliprange=0.2, loss_agg_mode="seq-mean-token-sum"
    )
    close(loss, -1.2 - 0.5 + 1.1 + 3.0)


def test_policy_loss_bad_args():
    old, lp, adv = _policy_case()
    with pytest.raises(ValueError, match="needs cliprange"):
        ca.compute_policy_loss(old, lp, adv, torch.ones(1, 4))
    with pytest.raises(ValueError, match="clip_ratio_c"):
        ca.compute_policy_loss(old, lp, adv, torch.ones(1, 4), cliprange=0.2, clip_ratio_c=1.0)


def test_value_loss():
    vpreds = torch.tensor([[1.0, 2.0, 0.0]], **f64)
    values = torch.tensor([[0.5, 0.5, 0.5]], **f64)
    returns = torch.tensor([[1.0, 0.0, 1.0]], **f64)
    loss, clipfrac = ca.compute_value_loss(vpreds, returns, values, torch.ones(1, 3, **f64), cliprange_value=0.2)
    # vclip = clamp(v, 0.3, 0.7) = [0.7, 0.7, 0.3]
    # (v-R)^2 = [0, 4, 1]; (vclip-R)^2 = [0.09, 0.49, 0.49]; max = [0.09, 4, 1]
    close(loss, 0.5 * (0.09 + 4.0 + 1.0) / 3)
    close(clipfrac, 1.0 / 3.0)


def test_entropy_from_log_probs():
    log_p = torch.log_softmax(torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]], **f64), dim=-1)
    # uniform over 2 -> ln 2; p = (1/4, 3/4) -> -(0.25 ln 0.25 + 0.75 ln 0.75)
    close(ca.entropy_from_log_probs(log_p), [math.log(2.0), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))])
