"""The main job end to end with a tiny model: real WebShop server, real Ray, real vLLM; PPO, GiGPO, ReMax, single-turn
data and a rollout plugin. GRPO with LoRA, a KL loss and one-step-off rollout, resumed after its driver is killed, is
the driver drill in ``tests/drills``; a resume on one node after a stop, ``test_multinode.py``."""

import json
import subprocess
from pathlib import Path

import pytest
from trainer_runs import (
    SHORT_REPLIES,
    SMALL_BOX,
    VALIDATE_EACH_STEP,
    by_step,
    check_ok,
    grpo_step_args,
    metric_rows,
    run_entry,
)

pytestmark = pytest.mark.slow


def main_ppo(tiny_model_path, webshop_tasks, server, out_dir, *extra) -> subprocess.CompletedProcess:
    """`python -m verl.trainer.main_ppo` on the tiny model and the WebShop server,
    2 steps of 2 tasks; ``extra`` overrides."""
    port = server.rsplit(":", 1)[1]
    args = [
        f"actor_rollout_ref.model.path={tiny_model_path}",
        f"data.train_files={webshop_tasks}/train.parquet",
        f"data.val_files={webshop_tasks}/test.parquet",
        "data.train_batch_size=2",
        "data.val_batch_size=2",
        "data.val_max_samples=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "actor_rollout_ref.rollout.max_model_len=2048",
        "actor_rollout_ref.rollout.kv_cache_gb=1",
        f"agent.env_ports=[{port}]",
        "agent.max_turns=2",
        "agent.max_response_length=16",
        "agent.max_obs_length=96",
        "agent.max_prompt_length=1024",
        "agent.max_trajectory_length=1536",
        "trainer.total_training_steps=2",
        "trainer.test_freq=2",
        "trainer.save_freq=1",
        "trainer.logger=[console,jsonl,tensorboard]",
        f"trainer.output_dir={out_dir}",
        *SMALL_BOX,
        *extra,
    ]
    return run_entry("main_ppo", args)


def run_main(tiny_model_path, webshop_tasks, server, out_dir, *extra) -> list[dict]:
    """`main_ppo`, which must succeed; its metrics rows."""
    check_ok(main_ppo(tiny_model_path, webshop_tasks, server, out_dir, *extra))
    return metric_rows(out_dir)


def test_ppo_two_steps_leave_all_artifacts(tiny_model_path, webshop_tasks, server, tmp_path):
    out = tmp_path / "ppo"
    rows = run_main(
        tiny_model_path, webshop_tasks, server, out, "trainer.keep_best=true", "trainer.val_before_train=true"
    )
    assert [r["step"] for r in rows] == [0, 1, 2]  # validation before training, then two steps
    assert "val/webshop/success_rate" in rows[0] and "val/webshop/reward/mean" in rows[0]
    for step in (1, 2):
        m = by_step(rows, step)
        for key in (
            "actor/pg_loss",
            "actor/grad_norm",
            "critic/vf_loss",
            "critic/values/mean",
            "env/success_rate",
            "env/reward/mean",
            "env/turns/mean",
            "response_length/mean",
            "timing_s/step",
            "perf/throughput",
        ):
            assert key in m, (step, key)
        assert 0.0 <= m["env/reward/mean"] <= 1.0
    assert "val/webshop/success_rate" in rows[2]
    ckpt = out / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert sorted(p.name for p in ckpt.iterdir() if p.is_dir()) == ["global_step_1", "global_step_2", "journal"]
    assert list((ckpt / "journal").iterdir()) == []  # each step's rollout journal went with its checkpoint
    for part in ("actor/actor.pt", "actor/huggingface/model.safetensors", "critic/critic.pt", "trainer_state.pt"):
        assert (ckpt / "global_step_2" / part).is_file(), part
    # the dev-chosen policy: the starting model unless step 2's validation beat step 0's
    dev = {step: by_step(rows, step)["val/webshop/success_rate"] for step in (0, 2)}
    best = json.loads((ckpt / "best_dev.json").read_text())
    expected = (
        (2, str((ckpt / "global_step_2").resolve())) if dev[2] > dev[0] else (0, str(Path(tiny_model_path).resolve()))
    )
    assert (best["step"], best["model"]) == expected and best["dev_success"] == max(dev.values())
    assert (out / "metrics.png").read_bytes()[:4] == b"\x89PNG"
    assert any((out / "tensorboard").iterdir())
    assert list((out / "trajectories").rglob("*.jsonl")) and list((out / "trajectories").rglob("*.html"))


# The estimator tests below roll out with the plain HF engine (14 s less a run than starting vLLM); the vLLM path
# through the trainer is test_ppo_two_steps_leave_all_artifacts's.
@pytest.mark.parametrize("history_window", [0, 1])  # whole trajectories, then step-wise rows
def test_gigpo_two_steps(tiny_model_path, webshop_tasks, server, tmp_path, history_window):
    rows = run_main(
        tiny_model_path,
        webshop_tasks,
        server,
        tmp_path / "gigpo",
        "algorithm.adv_estimator=gigpo",
        "agent.n=2",
        f"agent.history_window={history_window}",
        "trainer.val_before_train=false",
        "trainer.save_freq=0",
        "actor_rollout_ref.rollout.name=hf",
    )
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert 0.0 <= r["gigpo/anchor_step_share"] <= 1.0 and 0.0 <= r["adv/equal_score_group_share"] <= 1.0
        assert "actor/pg_loss" in r
    # validation counts trajectories, not the step-wise rows (one per turn) they may be trained as
    assert rows[-1]["val/webshop/count"] + rows[-1]["val/webshop/failed"] == 2.0


def test_remax_two_steps_with_the_greedy_baseline_and_native_tool_calls(
    tiny_model_path, webshop_tasks, server, tmp_path
):
    """ReMax, with the built-in agent acting through tool calls (agent.action_format=tool_call)."""
    out = tmp_path / "remax"
    rows = run_main(
        tiny_model_path,
        webshop_tasks,
        server,
        out,
        "algorithm.adv_estimator=remax",
        "agent.n=2",
        "agent.action_format=tool_call",
        "trainer.val_before_train=false",
        "trainer.save_freq=0",
        "actor_rollout_ref.rollout.name=hf",
    )
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:  # every greedy baseline rollout came back, so no sampled row was failed for want of one
        assert r["remax/failed_baseline_rows"] == 0.0 and "actor/pg_loss" in r
    block = '<tool_call>{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}</tool_call>'
    records = [
        json.loads(line) for line in (out / "trajectories" / "rollouts" / "step_000001.jsonl").read_text().splitlines()
    ]
    assert records and all(
        "You act by calling one of these tools:" in r["prompt_text"] and block in r["prompt_text"] for r in records
    )
    for r in records:  # a reply that is not one valid tool call is an invalid action, answered with the format
        for turn, after in zip(r["turns"], r["turns"][1:]):
            if turn["role"] == "assistant" and not turn["valid"]:
                assert after["text"].startswith("Invalid action: ") and after["text"].endswith(block), after["text"]


def test_single_turn_dataset_trains_without_an_env_server(tiny_model_path, countdown_data, tmp_path):
    """`train_grpo.sh --data_dir data/countdown`'s path: no server, generation by the engine, reward by data source."""
    out = tmp_path / "run"
    args = grpo_step_args(
        tiny_model_path,
        countdown_data,
        out,
        "single_turn",
        *SHORT_REPLIES,
        *VALIDATE_EACH_STEP,
        "agent.env_ports=[1]",  # no server listens there: the single-turn path never calls it
    )
    check_ok(run_entry("main_ppo", args))
    rows = metric_rows(out)
    step = by_step(rows, 1)
    assert step["rollout/trajectories"] == 4.0 and "reward/countdown/mean" in step and "actor/pg_loss" in step
    assert 0.0 <= step["reward/countdown/mean"] <= 1.0
    assert by_step(rows, 0)["val/countdown/count"] == 2.0


def test_a_rollout_plugin_from_outside_the_engine_trains_a_step(tiny_model_path, countdown_data, tmp_path):
    """The seam: `data.rollout=module:PLUGIN` with no agent and no env server; the trainer only sees a DataProto.
    The run's time budget (`trainer.max_minutes`, spent within the first step) makes that step its last of three."""
    out = tmp_path / "run"
    args = grpo_step_args(
        tiny_model_path,
        countdown_data,  # any verl-format parquet: the fixed rollout ignores the prompts
        out,
        "fixed_rollout:PLUGIN",
        "algorithm.reward_score_fn=exact_match",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        "actor_rollout_ref.rollout.name=hf",
        "trainer.total_training_steps=3",
        "trainer.max_minutes=0.0001",
        "trainer.logger=[jsonl]",
    )
    proc = check_ok(run_entry("main_ppo", args, import_paths=[Path(__file__).parent]))
    rows = metric_rows(out)
    assert [r["step"] for r in rows] == [1]
    assert "[trainer] stopping after step 1: trainer.max_minutes=0.0001 spent" in proc.stdout
    step = by_step(rows, 1)
    assert step["rollout/trajectories"] == 4.0
    assert step["reward/exact_match/mean"] == 0.5  # "4" is right, "5" is wrong, in every group
    assert step["adv/equal_score_group_share"] == 0.0 and step["actor/grad_norm"] > 0
