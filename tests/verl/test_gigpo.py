"""GiGPO against hand-computed values (the arithmetic is written next to each case)."""

import math

import numpy as np
import pytest
import torch

from verl import core_algos as ca
from verl.trainer.ppo import gigpo

f64 = dict(dtype=torch.float64)
R2 = math.sqrt(0.5)  # 1/sqrt(2): the normalised advantage of either member of a pair with distinct values


def close(actual, expected, atol=1e-9):
    torch.testing.assert_close(torch.as_tensor(actual, **f64), torch.as_tensor(expected, **f64), atol=atol, rtol=0)


def objects(values):
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def steps(index, traj_uid, anchors, score, live=True):
    """One trajectory's rows, one per step: (index, traj_uid, step, anchor_obs, R, live)."""
    return [(index, traj_uid, k, anchor, score, live) for k, anchor in enumerate(anchors)]


# One row per step (see `steps`).  step_gamma = 0.5 below.
#   g1: t1 R=4 K=3 anchors a,b,c;  t2 R=0 K=2 anchors a,b;  t3 R=2 K=1 anchor a;
#       t4 failed (mask all 0) but left in g1 on purpose, at anchor a with a score of 5: the mask alone must exclude it
#   g2: t5 R=1 K=2 anchors a,e;  t6 R=3 K=2 anchors a,f   (anchor "a" here is not g1's "a": groups are per index)
#   g3: t7 R=1 K=2 anchors h,h   (a single trajectory revisiting one state)
ROWS = [
    *steps("g1", "t1", "abc", 4.0),
    *steps("g1", "t2", "ab", 0.0),
    *steps("g1", "t3", "a", 2.0),
    *steps("g1", "t4", "a", 5.0, live=False),
    *steps("g2", "t5", "ae", 1.0),
    *steps("g2", "t6", "af", 3.0),
    *steps("g3", "t7", "hh", 1.0),
]
# each row: 2 model tokens and a padding slot (mask 1, 1, 0); the failed row is all 0
MASK = torch.tensor([[1.0, 1.0, 0.0] if live else [0.0, 0.0, 0.0] for *_, live in ROWS], **f64)

# Step returns G_k = 0.5 ** (K - 1 - k) * R:
#   t1: 0.25*4 = 1, 0.5*4 = 2, 4      t2: 0, 0      t3: 2
#   t5: 0.5, 1                        t6: 1.5, 3    t7: 0.5, 1
#
# Normalised (std, epsilon 0):
#   episode g1: R = 4, 0, 2 -> mean 2, unbiased var (4+4+0)/2 = 4, std 2 -> A_E = 1, -1, 0
#   episode g2: R = 1, 3 -> mean 2, std sqrt(2) -> A_E = -1/sqrt2, +1/sqrt2
#   episode g3: one trajectory -> A_E = 0
#   anchor (g1,a): G = 1 (t1), 0 (t2), 2 (t3) -> mean 1, var (0+1+1)/2 = 1 -> A_S = 0, -1, 1
#   anchor (g1,b): G = 2 (t1), 0 (t2) -> mean 1, std sqrt(2) -> A_S = +1/sqrt2, -1/sqrt2
#   anchor (g1,c), (g2,e), (g2,f): one row each -> A_S = 0
#   anchor (g2,a): G = 0.5 (t5), 1.5 (t6) -> mean 1, std sqrt(0.5) -> A_S = -1/sqrt2, +1/sqrt2
#   anchor (g3,h): G = 0.5, 1 -> mean 0.75, std sqrt(0.125) -> A_S = -1/sqrt2, +1/sqrt2
EXPECTED_NORMALISED = [
    1.0 + 0.0,  # t1 s0
    1.0 + R2,  # t1 s1: 1.7071067811865475
    1.0 + 0.0,  # t1 s2
    -1.0 - 1.0,  # t2 s0
    -1.0 - R2,  # t2 s1: -1.7071067811865475
    0.0 + 1.0,  # t3 s0
    0.0,  # t4 (failed)
    -R2 - R2,  # t5 s0: -1.4142135623730951
    -R2 + 0.0,  # t5 s1
    R2 + R2,  # t6 s0
    R2 + 0.0,  # t6 s1
    0.0 - R2,  # t7 s0
    0.0 + R2,  # t7 s1
]
# Without the std division:
#   episode g1: R - 2 = 2, -2, 0     g2: R - 2 = -1, 1     g3: 0
#   anchor (g1,a): G - 1 = 0, -1, 1   (g1,b): G - 1 = 1, -1   (g2,a): G - 1 = -0.5, 0.5   (g3,h): G - 0.75 = -0.25, 0.25
EXPECTED_CENTRED = [2.0, 3.0, 2.0, -3.0, -3.0, 1.0, 0.0, -1.5, -1.0, 1.5, 1.0, -0.25, 0.25]


def batch(rows=ROWS):
    index = objects([r[0] for r in rows])
    non_tensors = {
        "traj_uid": objects([r[1] for r in rows]),
        "step": objects([r[2] for r in rows]),
        "anchor_obs": objects([r[3] for r in rows]),
        "uid": index.copy(),
    }
    scores = torch.tensor([r[4] for r in rows], **f64)
    mask = torch.tensor([[1.0, 1.0, 0.0] if r[5] else [0.0, 0.0, 0.0] for r in rows], **f64)
    rewards = torch.zeros_like(mask)
    rewards[:, 1] = scores * mask[:, 1]  # last-token allocation: R on every live row's last model token
    return rewards, mask, index, non_tensors, scores


def per_token(per_row, mask=MASK):
    return torch.tensor(per_row, **f64).unsqueeze(-1) * mask


def test_normalised_episode_plus_anchor_advantages():
    rewards, mask, index, nt, scores = batch()
    metrics = {}
    adv, ret = gigpo.compute_gigpo_advantage(
        rewards, mask, index, nt, scores=scores, step_gamma=0.5, epsilon=0.0, metrics=metrics
    )
    close(adv, per_token(EXPECTED_NORMALISED))
    assert ret is adv
    assert adv.dtype == torch.float64
    # 12 live rows; anchor groups of >= 2 rows: (g1,a) 3, (g1,b) 2, (g2,a) 2, (g3,h) 2 -> 9 rows in 4 groups
    # episode groups of >= 2 trajectories: g1 (R 4, 0, 2) and g2 (R 1, 3), neither all equal; g3 has one
    assert metrics == {
        "gigpo/anchor_step_share": 9 / 12,
        "gigpo/anchor_group_size/mean": 9 / 4,
        "adv/equal_score_group_share": 0.0,
    }


def test_without_std_division():
    rewards, mask, index, nt, scores = batch()
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, step_gamma=0.5, norm_by_std=False)
    close(adv, per_token(EXPECTED_CENTRED))
    # GRPO's switch is not GiGPO's: the trainer passes it to every estimator, and GiGPO ignores it
    adv, _ = gigpo.compute_gigpo_advantage(
        rewards, mask, index, nt, scores=scores, step_gamma=0.5, norm_by_std=False, norm_adv_by_std_in_grpo=True
    )
    close(adv, per_token(EXPECTED_CENTRED))


def test_scores_default_to_the_summed_token_rewards():
    # last-token allocation: every live row carries R, so the row sums are the scores
    rewards, mask, index, nt, _ = batch()
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, step_gamma=0.5, epsilon=0.0)
    close(adv, per_token(EXPECTED_NORMALISED))
    # discounted allocation (gamma 0.9): row k carries 0.9 ** (K-1-k) * R; R is read off the last step, undiscounted
    K = {"t1": 3, "t2": 2, "t3": 1, "t4": 1, "t5": 2, "t6": 2, "t7": 2}
    discount = torch.tensor([0.9 ** (K[r[1]] - 1 - r[2]) for r in ROWS], **f64)
    adv, _ = gigpo.compute_gigpo_advantage(
        rewards * discount.unsqueeze(-1), mask, index, nt, step_gamma=0.5, epsilon=0.0
    )
    close(adv, per_token(EXPECTED_NORMALISED))


def test_row_order_does_not_matter():
    order = [12, 3, 7, 0, 6, 10, 1, 5, 11, 2, 9, 4, 8]
    rewards, mask, index, nt, scores = batch([ROWS[i] for i in order])
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, step_gamma=0.5, epsilon=0.0)
    close(adv, per_token([EXPECTED_NORMALISED[i] for i in order], MASK[order]))


def test_failed_row_is_excluded_even_when_the_trainer_regroups_it():
    # the trainer gives a failed row its own index; the result is the same as leaving it in g1
    rewards, mask, index, nt, scores = batch()
    index[6] = "failed-6"
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, step_gamma=0.5, epsilon=0.0)
    close(adv, per_token(EXPECTED_NORMALISED))


def test_step_gamma_and_step_weight():
    # one group: u1 R=1 K=3 anchors s,x,y;  u2 R=1 K=1 anchor s.  Equal R -> A_E = 0 (centred: R - mean = 0).
    # anchor s: G(u1, k=0) = step_gamma**2 * 1, G(u2, k=0) = 1 -> centred -(1 - step_gamma**2)/2, +(1 - step_gamma**2)/2
    rewards, mask, index, nt, scores = batch([*steps("g", "u1", "sxy", 1.0), *steps("g", "u2", "s", 1.0)])
    kw = dict(scores=scores, norm_by_std=False)
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, step_gamma=0.9, **kw)
    close(adv, per_token([-0.095, 0.0, 0.0, 0.095], mask))  # (1 - 0.81) / 2 = 0.095
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, step_gamma=0.5, step_weight=2.0, **kw)
    close(adv, per_token([-0.75, 0.0, 0.0, 0.75], mask))  # 2 * (1 - 0.25) / 2 = 0.75
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, step_gamma=1.0, **kw)
    close(adv, per_token([0.0, 0.0, 0.0, 0.0], mask))  # undiscounted: both returns are 1


def test_default_epsilon_and_equal_values():
    # one group, two one-step trajectories at distinct states: R = 0, 1 -> mean 0.5, std sqrt(0.5)
    rows = [("g", "u1", 0, "s1", 0.0, True), ("g", "u2", 0, "s2", 1.0, True)]
    rewards, mask, index, nt, scores = batch(rows)
    metrics = {}
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, metrics=metrics)
    a = 0.5 / (math.sqrt(0.5) + 1e-6)  # 0.70710578...
    close(adv, per_token([-a, a], mask))
    assert metrics == {
        "gigpo/anchor_step_share": 0.0,
        "gigpo/anchor_group_size/mean": 0.0,  # no shared state
        "adv/equal_score_group_share": 0.0,
    }
    # equal outcomes at a shared state: std 0 -> 0 / (0 + eps) = 0 everywhere, not nan
    rows = [("g", "u1", 0, "s", 1.0, True), ("g", "u2", 0, "s", 1.0, True)]
    rewards, mask, index, nt, scores = batch(rows)
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores)
    close(adv, torch.zeros(2, 3, **f64))


def test_all_rows_failed_gives_zeros_and_zero_metrics():
    rows = [("failed-0", "u1", 0, "s", 1.0, False), ("failed-1", "u1", 1, "s", 1.0, False)]
    rewards, mask, index, nt, scores = batch(rows)
    metrics = {}
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, metrics=metrics)
    close(adv, torch.zeros(2, 3, **f64))
    assert metrics == {
        "gigpo/anchor_step_share": 0.0,
        "gigpo/anchor_group_size/mean": 0.0,
        "adv/equal_score_group_share": 0.0,
    }


@pytest.mark.parametrize("missing", ["traj_uid", "step", "anchor_obs"])
def test_missing_column_names_it_and_the_step_wise_mode(missing):
    rewards, mask, index, nt, scores = batch()
    del nt[missing]
    with pytest.raises(ValueError, match=rf"'{missing}'.*one row per model turn \(agent\.history_window > 0\)"):
        gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores)


def test_registered_and_callable_by_keyword():
    assert ca.get_estimator("gigpo").fn is gigpo.compute_gigpo_advantage
    assert not ca.get_estimator("gigpo").needs_critic and ca.get_estimator("gigpo").group_baseline
    rewards, mask, index, nt, scores = batch()
    adv, _ = ca.get_estimator("gigpo").fn(
        token_level_rewards=rewards,
        response_mask=mask,
        index=index,
        non_tensor_batch=nt,
        scores=scores,
        step_gamma=0.5,
        epsilon=0.0,
        values=None,
        reward_baselines=None,
        gamma=1.0,
        lam=1.0,
        norm_adv_by_std_in_grpo=True,
    )
    close(adv, per_token(EXPECTED_NORMALISED))


# Intermediate rewards (SciWorld-like: the score rises along the episode; step_reward = increment / 100).
# One group, both trajectories end with R = 1, so A_E = 0 and only the steps can tell them apart:
#   u1: K=3 anchors s, x, y1; step_reward 0.2, 0.3, (0.9: the last turn's is ignored) -> r = 0.2, 0.3, 1 - 0.5 = 0.5
#   u2: K=3 anchors s, x, y2; step_reward 0, 0, 0                                      -> r = 0, 0, 1
# step_gamma = 0.5, G_k = r_k + 0.5 * G_{k+1}:
#   u1: G_2 = 0.5, G_1 = 0.3 + 0.25 = 0.55, G_0 = 0.2 + 0.275 = 0.475
#   u2: G_2 = 1,   G_1 = 0 + 0.5 = 0.5,     G_0 = 0 + 0.25 = 0.25
#   anchor s: 0.475, 0.25 -> mean 0.3625 -> centred +-0.1125;  anchor x: 0.55, 0.5 -> mean 0.525 -> +-0.025
#   anchors y1, y2: one row each -> 0
# Without the step rewards both have G = 0.25, 0.5, 1: every advantage would be 0.
PAID = [*steps("g", "u1", ["s", "x", "y1"], 1.0), *steps("g", "u2", ["s", "x", "y2"], 1.0)]
STEP_REWARD = [0.2, 0.3, 0.9, 0.0, 0.0, 0.0]


def test_step_returns_sum_the_rewards_paid_along_the_episode():
    rewards, mask, index, nt, scores = batch(PAID)
    nt["step_reward"] = objects(STEP_REWARD)
    metrics = {}
    adv, _ = gigpo.compute_gigpo_advantage(
        rewards, mask, index, nt, scores=scores, step_gamma=0.5, norm_by_std=False, metrics=metrics
    )
    close(adv, per_token([0.1125, 0.025, 0.0, -0.1125, -0.025, 0.0], mask))
    assert metrics["adv/equal_score_group_share"] == 1.0  # the one episode group scored 1, 1
    # normalised (default epsilon; A_E = 0 / (0 + eps) = 0): a pair +-d has std d*sqrt2 -> +-d / (d*sqrt2 + eps)
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, step_gamma=0.5)
    s, x = 0.1125 / (0.1125 * math.sqrt(2) + 1e-6), 0.025 / (0.025 * math.sqrt(2) + 1e-6)
    close(adv, per_token([s, x, 0.0, -s, -x, 0.0], mask))
    # the rewards add up to R: undiscounted, G_k is what is still to earn; u1 0.2+0.3+0.5, 0.3+0.5, 0.5 vs u2 1, 1, 1
    #   anchor s: 1, 1 -> 0;  anchor x: 0.8, 1 -> mean 0.9 -> -0.1, +0.1
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, step_gamma=1.0, norm_by_std=False)
    close(adv, per_token([0.0, -0.1, 0.0, 0.0, 0.1, 0.0], mask))
    # the last step's remainder may be negative: u1 ends at R = 0.4 after 0.5 paid -> r = 0.2, 0.3, -0.1
    #   A_E: R = 0.4, 1 -> mean 0.7 -> -0.3, +0.3
    #   u1: G_2 = -0.1, G_1 = 0.3 - 0.05 = 0.25, G_0 = 0.2 + 0.125 = 0.325; u2 as above
    #   anchor s: 0.325, 0.25 -> mean 0.2875 -> +-0.0375;  anchor x: 0.25, 0.5 -> mean 0.375 -> -+0.125
    scores = torch.tensor([0.4, 0.4, 0.4, 1.0, 1.0, 1.0], **f64)
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, step_gamma=0.5, norm_by_std=False)
    close(adv, per_token([-0.3 + 0.0375, -0.3 - 0.125, -0.3, 0.3 - 0.0375, 0.3 + 0.125, 0.3], mask))


def test_has_signal_sees_step_returns_that_differ_under_equal_outcomes():
    rewards, mask, index, nt, scores = batch(PAID)
    assert not gigpo.has_signal(scores, mask, index, nt, step_gamma=0.5)  # same R, same lengths: every G equal
    nt["step_reward"] = objects(STEP_REWARD)
    assert gigpo.has_signal(scores, mask, index, nt, step_gamma=0.5)  # anchors s and x now differ
    # equal R, no step rewards, but reached the shared state s at different distances from the end: 0.5 vs 1
    rows = [("g", "u1", 0, "s", 1.0, True), ("g", "u1", 1, "x", 1.0, True), ("g", "u2", 0, "s", 1.0, True)]
    rewards, mask, index, nt, scores = batch(rows)
    assert gigpo.has_signal(scores, mask, index, nt, step_gamma=0.5)
    assert not gigpo.has_signal(scores, mask, index, nt, step_gamma=1.0)
    # outcomes that differ are a signal on their own (t1 vs t2 of ROWS); a failed row's score is not
    rewards, mask, index, nt, scores = batch(ROWS[:5])
    assert gigpo.has_signal(scores, mask, index, nt, step_gamma=0.5)
    rows = [("g", "u1", 0, "s", 1.0, True), ("g", "u2", 0, "t", 1.0, True), ("g", "u3", 0, "s", 0.0, False)]
    rewards, mask, index, nt, scores = batch(rows)
    assert not gigpo.has_signal(scores, mask, index, nt, step_gamma=0.5)


# The same episodes as ROWS, one row per trajectory (history_window = 0): turn k's two model tokens sit at columns
# 3k and 3k+1 (turn_ends[k] = 3k+1), an observation token (mask 0) at 3k+2.  t4 failed: no turn, mask all 0.
TRAJECTORIES = {
    "t1": ("g1", "abc", 4.0),
    "t2": ("g1", "ab", 0.0),
    "t3": ("g1", "a", 2.0),
    "t4": ("g1", "", 5.0),
    "t5": ("g2", "ae", 1.0),
    "t6": ("g2", "af", 3.0),
    "t7": ("g3", "hh", 1.0),
}


def lists(values):
    arr = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        arr[i] = value
    return arr


def trajectory_batch(step_reward=None):
    names = list(TRAJECTORIES)
    mask = torch.zeros(len(names), 9, **f64)
    for b, name in enumerate(names):
        for k in range(len(TRAJECTORIES[name][1])):
            mask[b, 3 * k : 3 * k + 2] = 1.0
    index = objects([TRAJECTORIES[n][0] for n in names])
    nt = {
        "turn_ends": lists([[3 * k + 1 for k in range(len(TRAJECTORIES[n][1]))] for n in names]),
        "anchor_obs": lists([list(TRAJECTORIES[n][1]) for n in names]),
        "uid": index.copy(),
    }
    if step_reward is not None:
        nt["step_reward"] = lists(step_reward)
    scores = torch.tensor([TRAJECTORIES[n][2] for n in names], **f64)
    return torch.zeros_like(mask), mask, index, nt, scores


def spread(per_step_row, mask):
    """Each step row's value (in ROWS order) on its turn's tokens of its trajectory's row."""
    expected = torch.zeros_like(mask)
    names = list(TRAJECTORIES)
    for value, (_, name, k, *_rest) in zip(per_step_row, ROWS):
        expected[names.index(name), 3 * k : 3 * k + 2] = value
    return expected * mask


def test_whole_trajectory_rows_get_the_step_wise_advantages_on_each_turns_tokens():
    rewards, mask, index, nt, scores = trajectory_batch()
    metrics = {}
    adv, _ = gigpo.compute_gigpo_advantage(
        rewards, mask, index, nt, scores=scores, step_gamma=0.5, epsilon=0.0, metrics=metrics
    )
    close(adv, spread(EXPECTED_NORMALISED, mask))
    # t1's row by hand: turn 0 -> 1.0, turn 1 -> 1 + 1/sqrt2, turn 2 -> 1.0; observation tokens 0
    close(adv[0], [1.0, 1.0, 0.0, 1.0 + R2, 1.0 + R2, 0.0, 1.0, 1.0, 0.0])
    assert metrics == {
        "gigpo/anchor_step_share": 9 / 12,
        "gigpo/anchor_group_size/mean": 9 / 4,
        "adv/equal_score_group_share": 0.0,
    }
    adv, _ = gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores, step_gamma=0.5, norm_by_std=False)
    close(adv, spread(EXPECTED_CENTRED, mask))


def test_whole_trajectory_rows_carry_step_rewards_and_signal():
    # PAID's two episodes as two rows: u1 anchors s, x, y1 paid 0.2, 0.3, 0.9; u2 anchors s, x, y2 paid 0
    mask = torch.tensor([[1.0, 1.0, 0.0] * 3] * 2, **f64)
    index = objects(["g", "g"])
    nt = {
        "turn_ends": lists([[1, 4, 7], [1, 4, 7]]),
        "anchor_obs": lists([["s", "x", "y1"], ["s", "x", "y2"]]),
        "step_reward": lists([[0.2, 0.3, 0.9], [0.0, 0.0, 0.0]]),
        "uid": index.copy(),
    }
    scores = torch.tensor([1.0, 1.0], **f64)
    adv, _ = gigpo.compute_gigpo_advantage(
        torch.zeros_like(mask), mask, index, nt, scores=scores, step_gamma=0.5, norm_by_std=False
    )
    close(
        adv,
        [
            [0.1125, 0.1125, 0.0, 0.025, 0.025, 0.0, 0.0, 0.0, 0.0],
            [-0.1125, -0.1125, 0.0, -0.025, -0.025, 0.0, 0.0, 0.0, 0.0],
        ],
    )
    assert gigpo.has_signal(scores, mask, index, nt, step_gamma=0.5)
    del nt["step_reward"]
    assert not gigpo.has_signal(scores, mask, index, nt, step_gamma=0.5)


def test_whole_trajectory_rows_need_one_anchor_per_turn():
    rewards, mask, index, nt, scores = trajectory_batch()
    nt["anchor_obs"][0] = ["a", "b"]  # t1 has three turns
    with pytest.raises(ValueError, match=r"row 0: 3 turn ends but 2 anchor states"):
        gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores)
    del nt["anchor_obs"]
    with pytest.raises(ValueError, match=r"'anchor_obs': per-turn anchor states, which the built-in agent's rollout"):
        gigpo.compute_gigpo_advantage(rewards, mask, index, nt, scores=scores)
