"""One training step of ``main_ppo`` with ``data.rollout=gateway``: an agent program plays countdown tasks through
the gateway on the real engine, the countdown module scores its last reply, GRPO updates the actor."""

import json
from pathlib import Path

import pytest
from trainer_runs import SMALL_BOX, by_step, check_ok, metric_rows, run_entry

pytestmark = pytest.mark.slow


def test_main_ppo_trains_a_step_through_the_gateway(tiny_model_path, countdown_data, tmp_path):
    data = countdown_data
    out = tmp_path / "run"
    args = [
        f"actor_rollout_ref.model.path={tiny_model_path}",
        "data.rollout=gateway",
        "+agent.program=gateway_helpers:countdown_episode",
        "agent.episode_timeout_s=300",
        f"data.train_files={data}/train.parquet",
        f"data.val_files={data}/dev.parquet",
        "algorithm.adv_estimator=grpo",
        "agent.n=2",
        "data.train_batch_size=2",
        "data.val_batch_size=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "agent.max_response_length=16",
        "agent.max_prompt_length=512",
        "agent.max_trajectory_length=1024",
        "actor_rollout_ref.rollout.max_model_len=1024",
        "actor_rollout_ref.rollout.kv_cache_gb=1",
        "trainer.total_training_steps=1",
        "trainer.test_freq=1",
        "trainer.save_freq=0",
        "trainer.logger=[console,jsonl]",
        f"trainer.output_dir={out}",
        *SMALL_BOX,
    ]
    check_ok(run_entry("main_ppo", args, import_paths=[Path(__file__).parent]))
    step = by_step(metric_rows(out), 1)
    assert step["gateway/episodes"] == 4.0 and step["gateway/calls"] == 8.0 and step["gateway/failed_episodes"] == 0.0
    assert step["gateway/registry_scored"] == 4.0 and 0.0 <= step["reward/episode/mean"] <= 1.0
    assert "actor/pg_loss" in step
    records = [
        json.loads(line) for line in (out / "trajectories" / "rollouts" / "step_000001.jsonl").read_text().splitlines()
    ]
    assert [r["scored_by"] for r in records] == ["countdown"] * 4 and all(len(r["calls"]) == 2 for r in records)
