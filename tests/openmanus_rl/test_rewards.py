"""Reward components and the composer's breakdown, worked out by hand (allocation: tests/verl/test_reward_path.py)."""

import math

import pytest

from openmanus_rl.rewards import EpisodeOutcome, FormatReward, GoalReward, LengthPenalty, RewardComposer


def outcome(**kw):
    base = dict(
        env_name="webshop",
        env_reward=0.75,
        success=False,
        reward_scale=1.0,
        model_tokens=14,
        model_texts=("Action: search[x]", "hmm", "Action: click[y]", "Action: buy"),
    )
    return EpisodeOutcome(**{**base, **kw})


def test_composer_total_and_breakdown():
    composer = RewardComposer.from_config(
        {
            "goal": 1.0,
            "length": {"weight": 0.5, "max_length": 10, "kind": "quadratic"},
            "format": {"weight": 0.2, "patterns": {"webshop": [r"Action: (search|click)\["], "default": ["never"]}},
        },
        env_name="webshop",
    )
    total, breakdown = composer(outcome())
    # goal:   1.0 * 0.75                                   = 0.75
    # length: x = (14 - 10) / 10 = 0.4; 0.5 * -(0.4 ** 2)   = -0.08
    # format: 2 of 4 turns match; 0.2 * 2 / 4              = 0.1
    assert breakdown == pytest.approx({"goal": 0.75, "length": -0.08, "format": 0.1})
    assert total == pytest.approx(0.75 - 0.08 + 0.1)
    assert composer.names == ["goal", "length", "format"]


def test_format_patterns_fall_back_to_default_entry_then_template_pattern():
    texts = ("Thought: a\nAction: b",)
    by_default_entry = RewardComposer.from_config({"format": {"patterns": {"default": ["^Thought"]}}}, "babyai")
    by_template = RewardComposer.from_config({"format": 1.0}, "babyai", default_format_patterns=["nomatch"])
    assert by_default_entry(outcome(model_texts=texts)) == (1.0, {"format": 1.0})
    assert by_template(outcome(model_texts=texts)) == (0.0, {"format": 0.0})


def test_goal_reward_modes_and_scale():
    assert GoalReward()(outcome(env_reward=50.0, reward_scale=100.0)) == 0.5  # SciWorld's 0..100
    assert GoalReward("success")(outcome(success=True)) == 1.0
    assert GoalReward("success")(outcome(success=False, env_reward=0.9)) == 0.0


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("linear", -0.4),  # x = (14 - 10) / 10
        ("quadratic", -0.16),  # x ** 2
        ("log", -math.log(1.4)),  # log(1 + x)
    ],
)
def test_length_penalty_kinds(kind, expected):
    assert LengthPenalty(10, kind)(outcome(model_tokens=14)) == pytest.approx(expected)
    assert LengthPenalty(10, kind)(outcome(model_tokens=10)) == 0.0  # at the limit: no penalty


def test_length_penalty_scale():
    assert LengthPenalty(10, "linear", scale=2)(outcome(model_tokens=14)) == pytest.approx(-2.0)  # (14 - 10) / 2


def test_format_reward_share_of_turns():
    assert FormatReward([r"^Action:", r"\]$"])(outcome()) == pytest.approx(2 / 4)  # "Action: buy" has no ']'
    assert FormatReward([r"x"])(outcome(model_texts=())) == 0.0


@pytest.mark.parametrize(
    "config, message",
    [
        ({}, "empty"),
        ({"bonus": 1.0}, "unknown type 'bonus'"),
        ({"goal": "high"}, "weight must be a number"),
        ({"goal": {"mode": "always"}}, "mode must be"),
        ({"length": 0.1}, "'length' \\(length\\)"),  # max_length is required
        ({"length": {"max_length": 5, "kind": "cubic"}}, "kind must be one of"),
        ({"format": {"patterns": ["("]}}, "does not compile"),
        ({"g2": {"type": "goal", "extra": 1}}, "'g2'"),
    ],
)
def test_composer_config_errors(config, message):
    with pytest.raises(ValueError, match=message):
        RewardComposer.from_config(config, "webshop")
