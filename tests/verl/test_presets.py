"""The jobs' recipes are YAML presets (``verl/trainer/config/preset/<name>.yaml``) laid over ``ppo_trainer.yaml`` by
``preset=<name>``; ``train_ppo.sh`` and ``train_grpo.sh`` pick theirs and hold no setting of their own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from verl.trainer.ppo.config import PPOConfig, load_config
from verl.utils.typed_config import ConfigError
from verl.utils.yaml_defaults import CONFIG_DIR

REPO = Path(__file__).resolve().parents[2]
MODEL = ["actor_rollout_ref.model.path=m"]


def job(cfg: PPOConfig) -> tuple:
    """What the presets set: estimator, samples per task, tasks per step, mini-batch, KL loss and its weight."""
    a = cfg.actor_rollout_ref.actor
    return (
        cfg.algorithm.adv_estimator,
        cfg.agent["n"],
        cfg.data.train_batch_size,
        a.ppo_mini_batch_size,
        a.use_kl_loss,
        a.kl_loss_coef,
    )


def test_the_presets_are_ppo_and_grpo():
    assert sorted(p.name for p in (CONFIG_DIR / "preset").iterdir()) == ["grpo.yaml", "ppo.yaml"]


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ([], ("gae", 1, 4, 4, False, 0.001)),
        (["preset=ppo"], ("gae", 1, 4, 4, False, 0.001)),
        (["preset=grpo"], ("grpo", 4, 2, 8, True, 0.001)),
        (
            ["agent.n=8", "preset=grpo", "actor_rollout_ref.actor.ppo_mini_batch_size=16"],
            ("grpo", 8, 2, 16, True, 0.001),
        ),
    ],
    ids=["yaml", "ppo", "grpo", "a-key-override-wins-wherever-it-stands"],
)
def test_a_preset_lays_its_recipe_over_the_yaml(overrides, expected):
    assert job(load_config([*MODEL, *overrides], check_files=False)) == expected


def test_ppo_is_the_yaml_itself_and_no_job_validates_before_training():
    plain = load_config(MODEL, check_files=False)
    assert dataclasses.asdict(load_config([*MODEL, "preset=ppo"], check_files=False)) == dataclasses.asdict(plain)
    assert plain.trainer.val_before_train is False  # validation after the last step only (and every test_freq)


def test_an_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError) as err:
        load_config([*MODEL, "preset=dapo"], check_files=False)
    assert str(err.value).splitlines()[:4] == [
        "bad override: In 'ppo_trainer': Could not find 'preset/dapo'",
        "",
        "Available options in 'preset':",
        "\tgrpo",
    ]


def test_the_training_scripts_pass_the_preset_and_no_setting():
    script = (REPO / "scripts" / "run_training.sh").read_text()
    assert script.count('preset="$ALGO"') == 2  # the env job and the single-turn job
    for setting in ("algorithm.", "agent.n=", "data.train_batch_size=", "actor_rollout_ref.actor.", "val_before_train"):
        assert setting not in script, setting
