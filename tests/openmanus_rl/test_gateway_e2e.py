"""One training step of ``main_ppo`` with ``data.rollout=gateway``: an agent program plays countdown tasks through
the gateway on the real engine, the countdown module scores its last reply, GRPO updates the actor."""

import json
from pathlib import Path

import pytest
from trainer_runs import SHORT_REPLIES, VALIDATE_EACH_STEP, by_step, check_ok, grpo_step_args, metric_rows, run_entry

pytestmark = pytest.mark.slow


def test_main_ppo_trains_a_step_through_the_gateway(tiny_model_path, countdown_data, tmp_path):
    out = tmp_path / "run"
    args = grpo_step_args(
        tiny_model_path,
        countdown_data,
        out,
        "gateway",
        "+agent.program=gateway_helpers:countdown_episode",
        "agent.episode_timeout_s=300",
        "agent.max_trajectory_length=1024",
        *SHORT_REPLIES,
        *VALIDATE_EACH_STEP,
    )
    check_ok(run_entry("main_ppo", args, import_paths=[Path(__file__).parent]))
    step = by_step(metric_rows(out), 1)
    assert step["gateway/episodes"] == 4.0 and step["gateway/calls"] == 8.0 and step["gateway/failed_episodes"] == 0.0
    assert step["gateway/registry_scored"] == 4.0 and 0.0 <= step["reward/episode/mean"] <= 1.0
    assert "actor/pg_loss" in step
    records = [
        json.loads(line) for line in (out / "trajectories" / "rollouts" / "step_000001.jsonl").read_text().splitlines()
    ]
    assert [r["scored_by"] for r in records] == ["countdown"] * 4 and all(len(r["calls"]) == 2 for r in records)
