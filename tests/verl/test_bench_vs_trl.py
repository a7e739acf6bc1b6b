"""scripts/bench_vs_trl.py: the step figures and the mapping of one job onto both trainers' configs."""

from __future__ import annotations

import pytest
from bench_vs_trl import Job, Step, our_overrides, summarize, trl_config

JOB = Job(
    model="/models/m",
    data_dir="/data/countdown",
    prompts=4,
    group=4,
    prompt_len=256,
    response_len=128,
    lr=2e-6,
    kl=0.0,
    dtype="bfloat16",
    threads=2,
    warmup=1,
    steps=3,
    seed=1,
)


def test_tokens_per_second_counts_generated_and_trained_tokens():
    assert Step(seconds=4.0, generated=100, trained=300).tokens_per_s == 100.0


def test_summary_is_the_median_of_the_steps_after_warm_up():
    steps = [Step(100.0, 1, 1), Step(10.0, 200, 800), Step(30.0, 300, 900), Step(20.0, 100, 700)]
    assert summarize(steps, warmup=1) == {"s_per_step": 20.0, "tokens_per_s": 40.0, "generated": 200, "trained": 800}
    with pytest.raises(ValueError, match="no measured step"):
        summarize(steps, warmup=4)


def test_our_overrides_make_a_valid_grpo_config(tmp_path):
    from verl.trainer.ppo.config import load_config

    cfg = load_config(our_overrides(JOB, str(tmp_path / "out")), check_files=False)
    actor = cfg.actor_rollout_ref.actor
    assert (cfg.algorithm.adv_estimator, cfg.data.rollout, cfg.agent["n"], cfg.data.train_batch_size) == (
        "grpo",
        "single_turn",
        4,
        4,
    )
    assert (actor.ppo_mini_batch_size, actor.ppo_epochs, actor.loss_agg_mode) == (16, 1, "token-mean")
    assert (actor.optim.lr, actor.use_kl_loss, actor.mixed_precision) == (2e-6, False, "bfloat16")
    assert (cfg.agent["max_prompt_length"], cfg.agent["max_response_length"]) == (256, 128)
    assert cfg.trainer.total_training_steps == 4 and cfg.trainer.threads_per_worker == 2
    assert cfg.actor_rollout_ref.model.enable_gradient_checkpointing is False  # TRL's side runs without it too
    with_kl = load_config(our_overrides(Job(**{**JOB.__dict__, "kl": 0.001}), str(tmp_path / "kl")), check_files=False)
    assert (with_kl.actor_rollout_ref.actor.use_kl_loss, with_kl.actor_rollout_ref.actor.kl_loss_coef) == (True, 0.001)


def test_trl_config_is_one_token_mean_step_per_generation_batch(tmp_path):
    trl = pytest.importorskip("trl")

    args = trl.GRPOConfig(**trl_config(JOB, str(tmp_path), use_vllm=False))
    assert (args.generation_batch_size, args.steps_per_generation, args.num_generations) == (16, 1, 4)
    assert (args.loss_type, args.beta, args.num_iterations, args.learning_rate) == ("dapo", 0.0, 1, 2e-6)
    assert (args.max_completion_length, args.max_steps, args.bf16, args.gradient_checkpointing) == (128, 4, True, False)
