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


BREVITY = '''
from openmanus_rl.rewards import RewardComponent, register_component


@register_component("brevity")
class Brevity(RewardComponent):
    """1 / (1 + turns): fewer model turns, more reward."""

    def __init__(self, per_turn: float = 1.0) -> None:
        self.per_turn = per_turn

    def __call__(self, outcome):
        return 1.0 / (1.0 + self.per_turn * len(outcome.model_texts))
'''


def test_a_component_from_one_file_is_named_by_its_module_and_composes(tmp_path, monkeypatch):
    from openmanus_rl.rewards import COMPONENTS

    (tmp_path / "recipe_component.py").write_text(BREVITY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("openmanus_rl.rewards.components.COMPONENTS", dict(COMPONENTS))
    composer = RewardComposer.from_config(
        {"goal": 1.0, "short": {"type": "recipe_component:brevity", "weight": 0.5, "per_turn": 0.25}}, "webshop"
    )
    total, breakdown = composer(outcome())  # 4 model turns: 1 / (1 + 0.25 * 4) = 0.5, weighted 0.25
    assert breakdown == {"goal": 0.75, "short": 0.25} and total == 1.0
    again = RewardComposer.from_config({"short": {"type": "brevity"}}, "webshop")  # registered now: by name
    assert again(outcome()) == (0.2, {"short": 0.2})
    with pytest.raises(ValueError, match="'x': recipe_component registers no reward component named 'nope'; known:"):
        RewardComposer.from_config({"x": {"type": "recipe_component:nope"}}, "webshop")


def test_a_component_name_is_registered_once():
    from openmanus_rl.rewards import register_component

    with pytest.raises(ValueError, match="reward component 'goal' is already registered \\(GoalReward\\)"):
        register_component("goal")(type("Other", (GoalReward,), {}))
    with pytest.raises(ValueError, match="is not a RewardComponent subclass"):
        register_component("plain")(dict)
