"""Trainer pieces without Ray: config validation, the reward-module example, data order and resume, tracking."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.step_plan import pad_to_mini_batches, plan_step
from verl.utils.batch import pack_sequences, packed_proto
from verl.utils.dataset import TaskDataLoader, read_tasks
from verl.utils.typed_config import ConfigError


@pytest.fixture(scope="module")
def task_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tasks")
    for split, n in (("train", 10), ("test", 4)):
        frame = pd.DataFrame(
            [
                {
                    "data_source": "webshop",
                    "prompt": [{"role": "user", "content": f"task {i}"}],
                    "ability": "agent",
                    "reward_model": {"style": "env", "ground_truth": ""},
                    "extra_info": {"index": i, "split": split},
                }
                for i in range(n)
            ]
        )
        frame.to_parquet(folder / f"{split}.parquet")
    return folder


def overrides(tiny_model_path, task_files, *extra):
    return [
        f"actor_rollout_ref.model.path={tiny_model_path}",
        f"data.train_files={task_files}/train.parquet",
        f"data.val_files={task_files}/test.parquet",
        *extra,
    ]


def load(*args):
    from verl.trainer.ppo.config import load_config

    return load_config(list(args))


GROUPS_OF_TWO = ("algorithm.adv_estimator=grpo", "agent.n=2")  # GRPO over 2 samples a task
IN_ORDER = ("data.train_batch_size=2", "data.shuffle=false")  # batches of 2 tasks: 0, 1, then 2, 3, ...


def make_trainer(tiny_model_path, task_files, *extra):
    """A `RayPPOTrainer` without Ray on ``overrides(tiny_model_path, task_files, *extra)``, decoding by `TEXT_STUB`."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    return RayPPOTrainer(load(*overrides(tiny_model_path, task_files, *extra)), TEXT_STUB)


# ----------------------------------------------------------------------------- config


def test_defaults_load_and_derive_roles(tiny_model_path, task_files):
    cfg = load(*overrides(tiny_model_path, task_files))
    assert cfg.algorithm.adv_estimator == "gae" and cfg.use_critic and not cfg.use_ref
    assert cfg.critic.model.path == tiny_model_path  # interpolated from the actor
    assert cfg.actor_rollout_ref.rollout.response_length == cfg.agent["max_response_length"]
    grpo = load(
        *overrides(
            tiny_model_path,
            task_files,
            "algorithm.adv_estimator=grpo",
            "agent.n=4",
            "actor_rollout_ref.actor.use_kl_loss=true",
        )
    )
    assert not grpo.use_critic and grpo.use_ref


def test_validate_only_checks_and_derive_fills_the_estimators_loss_mode(tiny_model_path, task_files):
    """`validate` leaves the config as it found it; `derive` turns ``loss_agg_mode: auto`` into the estimator's
    own mode (Dr. GRPO: seq-mean-token-sum-norm, with the response budget 3072 - 1024 = 2048 as its constant)."""
    import copy

    from verl.trainer.ppo.config import PPOConfig, derive, validate
    from verl.utils.typed_config import load_yaml_config

    for estimator, mode, factor in (("grpo", "token-mean", None), ("dr_grpo", "seq-mean-token-sum-norm", 2048.0)):
        raw = load_yaml_config(
            PPOConfig,
            "ppo_trainer",
            overrides(tiny_model_path, task_files, f"algorithm.adv_estimator={estimator}", "agent.n=2"),
            "config",
        )
        before = copy.deepcopy(raw)
        validate(raw)
        assert raw == before and raw.actor_rollout_ref.actor.loss_agg_mode == "auto"
        derive(raw)
        assert (raw.actor_rollout_ref.actor.loss_agg_mode, raw.actor_rollout_ref.actor.loss_scale_factor) == (
            mode,
            factor,
        )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["actor_rollout_ref.actor.not_a_key=1"], r"bad override: .*not_a_key"),
        (["data.train_batch_size=abc"], r"config.data.train_batch_size: expected int, got str \('abc'\)"),
        (
            ["data.train_batch_size=3"],
            r"ppo_mini_batch_size=4 must divide the trajectories per step \(data.train_batch_size 3 x agent.n 1 = 3\)",
        ),
        (
            ["algorithm.adv_estimator=magic"],
            r"unknown estimator 'magic'; known: \['dr_grpo', 'gae', 'gigpo', 'grpo', "
            r"'reinforce_plus_plus', 'remax', 'rloo'\]",
        ),
        (
            ["algorithm.adv_estimator=gigpo", "agent.n=2", "data.rollout=single_turn"],
            r"gigpo needs the per-turn anchor states that only the built-in agent's rollout builds: "
            r"data.rollout=agent \(got single_turn\)",
        ),
        (
            ["agent.temperature=0.5"],
            r"^bad override: Key 'temperature' is not in struct\n    full_key: agent.temperature\n",
        ),
        (
            ["+agent.temperature=0.5"],
            r"^agent: unknown key\(s\) \['temperature'\]; known keys: \['action_format', 'concurrency', ",
        ),
        (["+agent.sampling={temperature:0.5}"], r"^agent: unknown key\(s\) \['sampling'\]; known keys: "),
        (
            ["actor_rollout_ref.rollout.temperature=-0.5"],
            r"^config.actor_rollout_ref.rollout.temperature must be >= 0 \(0: greedy\), got -0.5$",
        ),
        (
            ["actor_rollout_ref.rollout.top_p=0"],
            r"^config.actor_rollout_ref.rollout.top_p must be in \(0, 1\], got 0.0$",
        ),
        (
            ["actor_rollout_ref.rollout.top_k=0"],
            r"^config.actor_rollout_ref.rollout.top_k must be -1 \(off\) or >= 1, got 0$",
        ),
        (
            ["algorithm.reward_allocation=sparse"],
            r"algorithm.reward_allocation must be one of \['last_token', "
            r"'uniform_positive', 'discounted'\], got 'sparse'",
        ),
        (["data.rollout=chat"], r"data.rollout: unknown rollout 'chat'"),
        (["critic.enable=false"], r"algorithm.adv_estimator=gae needs a critic, but critic.enable=false"),
        (["algorithm.adv_estimator=grpo"], r"compares samples of one task: set agent.n >= 2 \(got 1\)"),
        (["trainer.logger=[console,carrier_pigeon]"], r"unknown backend\(s\) \['carrier_pigeon'\]"),
        (["algorithm.reward_score_fn=nope"], r"algorithm.reward_score_fn: unknown 'nope'"),
        (["trainer.n_workers_per_node=3"], r"ppo_mini_batch_size=4 must divide over the 3 worker ranks"),
        (
            ["algorithm.kl_penalty=kl2"],
            r"algorithm.kl_penalty must be one of \['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3'\], got 'kl2'",
        ),
        (
            ["actor_rollout_ref.actor.kl_loss_type=lowvar"],
            r"actor.kl_loss_type must be one of \['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3'\], got 'lowvar'",
        ),
        (
            ["critic.loss_agg_mode=auto"],
            r"critic.loss_agg_mode must be one of \['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', "
            r"'seq-mean-token-sum-norm'\], got 'auto'",
        ),
        (
            ["actor_rollout_ref.rollout.kv_cache_gb=0"],
            r"actor_rollout_ref.rollout.kv_cache_gb must be > 0 GiB \(got 0.0\)",
        ),
        (
            ["actor_rollout_ref.rollout.block_size=24"],
            r"actor_rollout_ref.rollout.block_size must be a multiple of 16 tokens \(or null: "
            r"the device's default\), got 24",
        ),
        (["agent.max_turns=two"], r"agent.max_turns: expected int \| None, got 'two'"),
        (["+agent.max_turn=3"], r"agent: unknown key\(s\) \['max_turn'\]"),
        (["trainer.staleness=2"], r"trainer.staleness must be 0 \(synchronous\) or 1 \(one-step-off\), got 2"),
        (["trainer.max_minutes=0"], r"trainer.max_minutes must be > 0 \(or null: no time budget\), got 0"),
        (
            ["trainer.policy_nodes={gpus:8}"],
            r"trainer.policy_nodes maps Ray node label names to string values \(quote them\), "
            r"got \{'gpus': 8\}",
        ),
        (
            ["trainer.staleness=1"],
            r"trainer.staleness=1 trains on samples drawn by the weights of one update ago: "
            r"set actor_rollout_ref.actor.tis_cap",
        ),
        (
            ["trainer.staleness=1", "actor_rollout_ref.actor.tis_cap=2", "algorithm.adv_estimator=remax"],
            r"trainer.staleness=1 cannot run with algorithm.adv_estimator=remax",
        ),
        (
            ["algorithm.adv_estimator=remax", "algorithm.filter_groups.enable=true"],
            r"algorithm.filter_groups drops groups whose samples would all get advantage 0, which only a group "
            r"estimator \(grpo, dr_grpo, rloo, gigpo\) has; algorithm.adv_estimator=remax",
        ),
    ],
)
def test_bad_configs_fail_with_one_clear_message(tiny_model_path, task_files, extra, message):
    with pytest.raises(ConfigError, match=message):
        load(*overrides(tiny_model_path, task_files, *extra))


def test_missing_model_and_data_fail_before_anything_starts(tiny_model_path, task_files, tmp_path):
    with pytest.raises(ConfigError, match=r"model.path='/nonexistent' is not a Hugging Face model folder"):
        load(*overrides("/nonexistent", task_files))
    with pytest.raises(
        ConfigError, match=r"data.val_files='.*missing.parquet' does not exist; run scripts/prepare_data.py"
    ):
        load(*overrides(tiny_model_path, task_files, f"data.val_files={tmp_path}/missing.parquet"))


def test_main_reports_config_errors_with_exit_code_2(tiny_model_path, task_files, capsys):
    from verl.trainer.main_ppo import main

    assert main(overrides(tiny_model_path, task_files, "data.train_batch_size=3")) == 2
    assert "config error: " in capsys.readouterr().err


# ----------------------------------------------------------------------------- reward modules


def short_answer(data_source, solution_str, ground_truth, extra_info=None):
    """docs/configuration.md's worked example: 1 for a successful episode, minus 0.01 per turn."""
    return float(extra_info["success"]) - 0.01 * extra_info["num_turns"]


def rollout_like_batch():
    packed = pack_sequences(
        [[1, 2], [3]], [[10, 11, 12, 13], [20, 21]], response_masks=[[1, 1, 0, 1], [1, 1]], pad_id=0
    )
    return DataProto.from_dict(
        packed,
        {
            "data_source": ["webshop", "webshop"],
            "task_id": [5, 6],
            "env_reward": [0.7, 0.0],
            "success": [True, False],
            "num_turns": [2, 1],
            "reward_breakdown": [{"goal": 0.7}, {"goal": 0.0}],
            "reward_total": [0.7, 0.0],
            "turn_ends": [[1, 3], [1]],
            "failed": [False, False],
        },
    )


TEXT_STUB = type("T", (), {"decode": staticmethod(lambda ids, skip_special_tokens: "x")})()


def test_reward_module_example_is_paid_on_last_model_token():
    from verl.trainer.ppo.reward import RewardManager
    from verl.utils import reward_score

    reward_score.register("short_answer")(short_answer)
    try:
        batch = rollout_like_batch()
        manager = RewardManager(tokenizer=TEXT_STUB, reward_score_fn="short_answer")
        metrics = manager(batch)
        # row 0: success, 2 turns -> 1 - 0.02 = 0.98 on its last model token (index 3)
        # row 1: failure, 1 turn -> 0 - 0.01 = -0.01 on index 1
        torch.testing.assert_close(
            batch.batch["token_level_scores"], torch.tensor([[0.0, 0.0, 0.0, 0.98], [0.0, -0.01, 0.0, 0.0]])
        )
        torch.testing.assert_close(batch.batch["outcome_scores"], torch.tensor([0.98, -0.01]))
        assert metrics == {"reward/short_answer/mean": pytest.approx((0.98 - 0.01) / 2), "reward/errors": 0.0}
    finally:
        reward_score.SUPPORTED_REWARD_SCORE_FNS.pop("short_answer")


# ----------------------------------------------------------------------------- data order


def test_dataloader_order_is_seeded_and_resumable(task_files):
    frame = read_tasks(task_files / "train.parquet")

    def ids(b) -> list:
        return [e["index"] for e in b.non_tensor_batch["extra_info"]]

    a = TaskDataLoader(frame, 4, shuffle=True, seed=3)
    run = [ids(a.next_batch()) for _ in range(5)]  # 2 batches per epoch (10 rows, last 2 dropped)
    assert sorted(run[0] + run[1]) == sorted(np.random.RandomState(3).permutation(10)[:8].tolist())
    assert run[2] + run[3] == np.random.RandomState(4).permutation(10)[:8].tolist()
    b = TaskDataLoader(frame, 4, shuffle=True, seed=3)
    b.next_batch(), b.next_batch(), b.next_batch()
    resumed = TaskDataLoader(frame, 4, shuffle=True, seed=3)
    resumed.load_state_dict(b.state_dict())
    assert [ids(resumed.next_batch()) for _ in range(2)] == run[3:5]
    with pytest.raises(ValueError, match=r"batch_size 11 must be in \[1, 10\]"):
        TaskDataLoader(frame, 11)


def test_read_tasks_checks_columns(tmp_path):
    pd.DataFrame([{"prompt": "x", "extra_info": {"split": "train"}}]).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"lacks columns \['data_source'\]; has \['prompt', 'extra_info'\]"):
        read_tasks(tmp_path / "bad.parquet")
    # single-turn rows need no env task id
    pd.DataFrame([{"data_source": "countdown", "extra_info": {"split": "train"}}]).to_parquet(tmp_path / "ok.parquet")
    assert len(read_tasks(tmp_path / "ok.parquet")) == 1


# ----------------------------------------------------------------------------- tracking


def test_tracking_jsonl_and_plot(tmp_path, capsys):
    from verl.utils.plot import plot_metrics
    from verl.utils.tracking import Tracking

    t = Tracking("p", "e", ["console", "jsonl"], str(tmp_path))
    t.log({"env/success_rate": 0.5, "env/reward/mean": 0.25, "note": "skipped", "bad": float("nan")}, step=1)
    t.log({"env/success_rate": 0.75, "filter/kept_success_rate": 0.5, "val/webshop/success_rate": 1.0}, step=2)
    t.close()
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines == [
        {"step": 1, "env/success_rate": 0.5, "env/reward/mean": 0.25},
        {"step": 2, "env/success_rate": 0.75, "filter/kept_success_rate": 0.5, "val/webshop/success_rate": 1.0},
    ]
    out = capsys.readouterr().out
    assert (
        "[step 1] succ=0.5 reward=0.25" in out and "[step 2] succ=0.75 kept_succ=0.5 val/webshop/success_rate=1" in out
    )
    png = plot_metrics(tmp_path / "metrics.jsonl", tmp_path / "m.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"unknown logger\(s\) \['fax'\]"):
        Tracking("p", "e", ["fax"], str(tmp_path))


def test_tracking_console_line_counts_steps_and_estimates_the_time_left(tmp_path, capsys, monkeypatch):
    from verl.utils import tracking

    clock = iter([100.0, 130.0, 160.0, 190.0])  # construction, then one reading per step: 30 s a step
    monkeypatch.setattr(tracking.time, "monotonic", lambda: next(clock))
    t = tracking.Tracking("p", "e", ["console"], str(tmp_path), total_steps=4)
    for step in (2, 3, 4):  # resumed after step 1: the estimate counts the steps this run made
        t.log({"sft/train_loss": 1.0}, step=step)
    assert capsys.readouterr().out.splitlines() == [
        "[step 2/4] loss=1 (~60 s left)",  # 30 s for 1 step, 2 to go
        "[step 3/4] loss=1 (~30 s left)",  # 60 s for 2 steps, 1 to go
        "[step 4/4] loss=1",
    ]
    assert [tracking.time_left(s) for s in (89, 90, 5399, 5400)] == [
        "~89 s left",
        "~1.5 min left",
        "~90.0 min left",
        "~1.5 h left",
    ]


# ----------------------------------------------------------------------------- loss aggregation and metrics


def test_dr_grpo_implies_its_loss_aggregation_over_the_configured_budget(tiny_model_path, task_files):
    dr = load(*overrides(tiny_model_path, task_files, "algorithm.adv_estimator=dr_grpo", "agent.n=2"))
    # the budget is max_trajectory_length - max_prompt_length = 3072 - 1024, not the batch's widest row
    assert (dr.actor_rollout_ref.actor.loss_agg_mode, dr.actor_rollout_ref.actor.loss_scale_factor) == (
        "seq-mean-token-sum-norm",
        2048.0,
    )
    grpo = load(*overrides(tiny_model_path, task_files, "algorithm.adv_estimator=grpo", "agent.n=2"))
    assert (grpo.actor_rollout_ref.actor.loss_agg_mode, grpo.actor_rollout_ref.actor.loss_scale_factor) == (
        "token-mean",
        None,
    )
    explicit = load(
        *overrides(
            tiny_model_path,
            task_files,
            "algorithm.adv_estimator=dr_grpo",
            "agent.n=2",
            "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
        )
    )
    assert explicit.actor_rollout_ref.actor.loss_agg_mode == "seq-mean-token-mean"


def test_clip_ratio_counts_rows_cut_by_the_budget_not_the_widest_row():
    from verl.trainer.ppo.metrics import compute_data_metrics

    packed = pack_sequences(
        [[1], [2], [3], [4], [5]],
        [[5, 6, 7], [5], [5, 6], [5], [5, 6, 7]],
        response_masks=[[1, 1, 1], [1], [1, 1], [1], [0, 0, 0]],
        pad_id=0,
    )
    for key in ("token_level_scores", "token_level_rewards", "advantages", "returns"):
        packed[key] = torch.zeros(5, 3)
    # the last row failed (no model token): it counts in no denominator
    batch = DataProto.from_dict(packed, {"status": ["done", "truncated", "done", "turn_limit", "truncated"]})
    assert compute_data_metrics(batch, use_critic=False, response_budget=3)["response_length/clip_ratio"] == 0.25
    batch.non_tensor_batch.pop("status")  # no status (e.g. a plain dataset): responses that filled the budget
    assert compute_data_metrics(batch, use_critic=False, response_budget=3)["response_length/clip_ratio"] == 0.25
    assert compute_data_metrics(batch, use_critic=False, response_budget=8)["response_length/clip_ratio"] == 0.0


# ----------------------------------------------------------------------------- dynamic sampling


class ScriptedRollout:
    """Returns prepared batches in order: per task row, two samples whose composed rewards the test sets."""

    pad_id = 0

    def __init__(self, rewards_per_call):
        self.rewards_per_call, self.calls = list(rewards_per_call), []

    def run_llm_loop(self, tasks, output_dir=None, global_step=0, do_sample=True):
        rewards = self.rewards_per_call.pop(0)
        ids = [e["index"] for e in tasks.non_tensor_batch["extra_info"]]
        self.calls.append(ids)
        width = len(self.calls)  # each call has a different response width, so the merge must re-pad
        rows = [(task, r) for task, pair in zip(ids, rewards) for r in pair]
        packed = pack_sequences([[1, 2]] * len(rows), [[5] * width] * len(rows), pad_id=0)
        return DataProto.from_dict(
            packed,
            {
                "uid": [f"task{t}" for t, _ in rows],
                "data_source": ["webshop"] * len(rows),
                "task_id": [t for t, _ in rows],
                "reward_total": [r for _, r in rows],
                "success": [r == 1.0 for _, r in rows],
                "failed": [False] * len(rows),
            },
            meta_info={"metrics": {"env/success_rate": 0.5}},
        )


def test_dynamic_sampling_drops_equal_groups_and_refills_from_the_next_prompts(tiny_model_path, task_files):
    filtering = ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.max_rounds=2")
    trainer = make_trainer(tiny_model_path, task_files, *GROUPS_OF_TWO, *IN_ORDER, *filtering)
    # call 1 (tasks 0, 1): task 0 all 1.0 (dropped), task 1 mixed (kept); call 2 (tasks 2, 3): 2 equal, 3 mixed
    trainer.collector.rollout = ScriptedRollout([[(1.0, 1.0), (0.0, 1.0)], [(0.0, 0.0), (1.0, 0.5)]])
    collected = trainer.collector.collect(trainer.train_loader.next_batch(), 1, 0)
    batch, metrics = collected.batch, collected.metrics
    assert trainer.collector.rollout.calls == [[0, 1], [2, 3]]
    assert list(batch.non_tensor_batch["uid"]) == ["task1", "task1", "refill1-task3", "refill1-task3"]
    assert batch.batch["outcome_scores"].tolist() == [0.0, 1.0, 1.0, 0.5]
    assert batch.batch["responses"].tolist() == [[5, 0], [5, 0], [5, 5], [5, 5]]  # re-padded to the wider refill
    assert batch.batch["response_mask"].tolist() == [[1, 0], [1, 0], [1, 1], [1, 1]]
    assert metrics["filter/dropped_groups"] == 2.0 and metrics["filter/refill_rounds"] == 1.0
    assert metrics["filter/shortfall_groups"] == 0.0 and metrics["env/success_rate"] == 0.5
    assert metrics["filter/kept_success_rate"] == 0.5  # task 1 (0, 1) and task 3 (1, 0.5); round 1 had 3 of 4
    assert trainer.train_loader.state_dict()["batch_in_epoch"] == 2  # the refill is in the checkpointed position

    # rounds run out: dropped groups fill the batch so its size (and divisibility) holds
    trainer.collector.rollout = ScriptedRollout(
        [[(1.0, 1.0), (0.0, 0.0)], [(0.5, 0.5), (0.0, 0.0)], [(1.0, 1.0), (0.2, 0.2)]]
    )
    collected = trainer.collector.collect(trainer.train_loader.next_batch(), 2, 0)
    batch, metrics = collected.batch, collected.metrics
    assert len(batch) == 4 and metrics["filter/shortfall_groups"] == 2.0 and metrics["filter/refill_rounds"] == 2.0
    assert list(batch.non_tensor_batch["uid"]) == ["task4", "task4", "task5", "task5"]
    assert metrics["filter/kept_success_rate"] == 0.5


class StepRollout:
    """Step-wise rows (one per turn), as the agent's step-wise mode lays them out: per call, per task row,
    ``agent.n`` trajectories given as ``(R, [anchor of each turn])``."""

    pad_id = 0

    def __init__(self, trajectories_per_call):
        self.trajectories_per_call, self.calls = list(trajectories_per_call), []

    def run_llm_loop(self, tasks, output_dir=None, global_step=0, do_sample=True):
        ids = [e["index"] for e in tasks.non_tensor_batch["extra_info"]]
        self.calls.append(ids)
        rows = [
            (task, copy, k, anchor, reward)
            for task, trajectories in zip(ids, self.trajectories_per_call.pop(0))
            for copy, (reward, anchors) in enumerate(trajectories)
            for k, anchor in enumerate(anchors)
        ]
        packed = pack_sequences([[1, 2]] * len(rows), [[5]] * len(rows), pad_id=0)
        return DataProto.from_dict(
            packed,
            {
                "uid": [f"task{t}" for t, *_ in rows],
                "traj_uid": [f"task{t}/{c}" for t, c, *_ in rows],
                "step": [k for _, _, k, _, _ in rows],
                "anchor_obs": [a for *_, a, _ in rows],
                "data_source": ["webshop"] * len(rows),
                "task_id": [t for t, *_ in rows],
                "reward_total": [r for *_, r in rows],
                "success": [r == 1.0 for *_, r in rows],
                "failed": [False] * len(rows),
            },
        )


def test_dynamic_sampling_under_gigpo_keeps_equal_outcomes_whose_step_returns_differ(tiny_model_path, task_files):
    step_wise = ("algorithm.adv_estimator=gigpo", "agent.n=2", "agent.history_window=1")
    filtering = ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.max_rounds=1")
    trainer = make_trainer(tiny_model_path, task_files, *step_wise, *IN_ORDER, *filtering)
    trainer.collector.rollout = StepRollout(
        [
            # task 0: both R = 1, but one met state s one turn before the end (G = 0.95)
            #   and the other at the end (G = 1): kept
            # task 1: both R = 0: every G is 0, dropped
            [[(1.0, ["s", "x"]), (1.0, ["s"])], [(0.0, ["s", "x"]), (0.0, ["s"])]],
            # refill: task 2 with outcomes 1 and 0: kept; task 3 not needed
            [[(1.0, ["s"]), (0.0, ["s"])], [(1.0, ["s"]), (1.0, ["s"])]],
        ]
    )
    collected = trainer.collector.collect(trainer.train_loader.next_batch(), 1, 0)
    assert trainer.collector.rollout.calls == [[0, 1], [2, 3]]
    assert list(collected.batch.non_tensor_batch["uid"]) == ["task0"] * 3 + ["refill1-task2"] * 2
    assert collected.metrics["filter/dropped_groups"] == 2.0 and collected.metrics["filter/refill_rounds"] == 1.0
    # trajectories, not rows: task 0's two successes (3 rows) and task 2's one of two give 3 of 4 (rows: 4 of 5)
    assert collected.metrics["filter/kept_success_rate"] == 0.75


class GreedyRollout:
    """The ReMax baseline rollout: one greedy trajectory per task, with its composed reward, or failed (None)."""

    pad_id = 0

    def __init__(self, reward_of_task):
        self.reward_of_task = reward_of_task

    def run_llm_loop(self, tasks, output_dir=None, global_step=0, do_sample=True):
        assert do_sample is False
        ids = [e["index"] for e in tasks.non_tensor_batch["extra_info"]]
        failed = [self.reward_of_task[t] is None for t in ids]
        packed = pack_sequences(
            [[1, 2]] * len(ids), [[5]] * len(ids), response_masks=[[int(not f)] for f in failed], pad_id=0
        )
        return DataProto.from_dict(
            packed,
            {
                "uid": [f"task{t}" for t in ids],
                "data_source": ["webshop"] * len(ids),
                "task_id": ids,
                "reward_total": [self.reward_of_task[t] or 0.0 for t in ids],
                "success": [False] * len(ids),
                "failed": failed,
                "status": ["failed" if f else "done" for f in failed],
                "error": ["env down" if f else "" for f in failed],
            },
        )


def test_remax_task_whose_greedy_rollout_failed_has_its_rows_failed_not_a_zero_baseline(tiny_model_path, task_files):
    from verl.trainer.ppo.faults import TooManyFailures, check_failures

    trainer = make_trainer(tiny_model_path, task_files, "algorithm.adv_estimator=remax", "agent.n=2", *IN_ORDER)
    tasks = trainer.train_loader.next_batch()
    batch = ScriptedRollout([[(1.0, 0.0), (0.5, 0.25)]]).run_llm_loop(tasks)  # task 0: 1, 0; task 1: 0.5, 0.25
    batch.non_tensor_batch["status"] = np.array(["done"] * 4, dtype=object)
    trainer.scorer.reward_manager(batch)
    trainer.collector.val_rollout = GreedyRollout({0: 0.25, 1: None})  # task 1's greedy rollout failed

    assert trainer.collector.greedy_baselines(tasks, batch, 0) == {"remax/failed_baseline_rows": 2.0}
    nt = batch.non_tensor_batch
    assert list(nt["failed"]) == [False, False, True, True] and list(nt["status"]) == [
        "done",
        "done",
        "failed",
        "failed",
    ]
    assert nt["error"][2] == "remax: the greedy baseline rollout of this task failed"
    assert batch.batch["response_mask"].tolist() == [[1], [1], [0], [0]]
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"].clone()
    trainer.compute_advantage(batch)
    # task 0: s - b = 1 - 0.25, 0 - 0.25; task 1 is out of the loss (a baseline of 0 would have given 0.5, 0.25)
    assert batch.batch["advantages"].tolist() == [[0.75], [-0.25], [0.0], [0.0]]
    trainer.config.trainer.max_failed_fraction = 0.25  # the failed rows count as failed: 2 of 4
    with pytest.raises(
        TooManyFailures, match=r"2 of 4 trajectories failed .* most common error: remax: the greedy baseline"
    ):
        check_failures(batch, trainer.config.trainer.max_failed_fraction)


def test_the_kl_term_enters_the_estimator_as_its_own_input(tiny_model_path, task_files, monkeypatch):
    """``token_level_rewards = token_level_scores + kl`` and each row's score ``R + sum_t kl_t``: the scores are
    never rewritten and the term is never worked back out of the rewards."""
    from verl import core_algos

    trainer = make_trainer(tiny_model_path, task_files, "algorithm.adv_estimator=grpo", "agent.n=2")
    seen = {}

    def spy(**kwargs):
        seen.update(kwargs)
        return torch.zeros(2, 4), torch.zeros(2, 4)

    monkeypatch.setitem(core_algos.ESTIMATORS, "grpo", dataclasses.replace(core_algos.get_estimator("grpo"), fn=spy))
    batch = rollout_like_batch()
    batch.non_tensor_batch["uid"] = np.array(["a", "a"], dtype=object)
    batch.batch["outcome_scores"] = torch.tensor([1.0, 0.5])
    batch.batch["token_level_scores"] = torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 0.5, 0.0, 0.0]])
    kl = torch.tensor([[-0.25, -0.125, 0.0, -0.5], [0.25, -0.5, 0.0, 0.0]])
    trainer.compute_advantage(batch, kl)
    assert seen["token_level_rewards"].tolist() == [[-0.25, -0.125, 0.0, 0.5], [0.25, 0.0, 0.0, 0.0]]
    assert seen["scores"].tolist() == [1.0 - 0.875, 0.5 - 0.25]
    assert batch.batch["outcome_scores"].tolist() == [1.0, 0.5]  # R itself is untouched
    assert batch.batch["token_level_scores"].tolist() == [[0.0, 0.0, 0.0, 1.0], [0.0, 0.5, 0.0, 0.0]]
    trainer.compute_advantage(batch)  # no KL term: the scores as they are
    assert seen["scores"].tolist() == [1.0, 0.5]
    assert seen["token_level_rewards"].tolist() == batch.batch["token_level_scores"].tolist()


@pytest.mark.parametrize(
    "estimator, extra, own",
    [
        ("grpo", [], {}),
        (
            "gigpo",
            ["agent.history_window=1", "algorithm.gigpo.norm_by_std=false"],
            {"step_gamma": 0.95, "step_weight": 1.0, "norm_by_std": False},
        ),
    ],
)
def test_an_estimator_gets_its_own_options_and_no_other_estimators(
    tiny_model_path, task_files, monkeypatch, estimator, extra, own
):
    from verl import core_algos

    trainer = make_trainer(tiny_model_path, task_files, f"algorithm.adv_estimator={estimator}", "agent.n=2", *extra)
    seen = {}

    def spy(**kwargs):
        seen.update(kwargs)
        return torch.zeros(2, 4), torch.zeros(2, 4)

    monkeypatch.setitem(
        core_algos.ESTIMATORS, estimator, dataclasses.replace(core_algos.get_estimator(estimator), fn=spy)
    )
    batch = rollout_like_batch()
    batch.non_tensor_batch["uid"] = np.array(["a", "a"], dtype=object)
    batch.batch["outcome_scores"] = torch.zeros(2)
    batch.batch["token_level_scores"] = batch.batch["token_level_rewards"] = torch.zeros(2, 4)
    trainer.compute_advantage(batch)
    common = {
        "token_level_rewards",
        "response_mask",
        "index",
        "scores",
        "values",
        "reward_baselines",
        "gamma",
        "lam",
        "norm_adv_by_std_in_grpo",
        "non_tensor_batch",
        "metrics",
    }
    assert set(seen) == common | set(own) and {k: seen[k] for k in own} == own


RECIPE_ESTIMATOR = """
from dataclasses import dataclass

import torch

from verl.core_algos import register_adv_est


@dataclass
class ScaledCentringOptions:
    scale: float = 1.0


@register_adv_est("scaled_centring", group_baseline=True, options=ScaledCentringOptions)
def scaled_centring(scores, index, response_mask, scale, **kwargs):
    groups = {key: [i for i, k in enumerate(index) if k == key] for key in set(index)}
    baseline = torch.stack([scores[groups[key]].mean() for key in index])
    advantages = scale * (scores - baseline)[:, None] * response_mask
    return advantages, advantages
"""


def test_an_estimator_from_one_file_with_its_options_trains(tiny_model_path, task_files, monkeypatch, tmp_path):
    """README's "add an estimator" recipe: one file anywhere, named in algorithm.adv_estimator, its options
    set as algorithm.<name>.* with no other file touched."""
    from verl import core_algos
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    (tmp_path / "recipe_estimator.py").write_text(RECIPE_ESTIMATOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(core_algos, "ESTIMATORS", dict(core_algos.ESTIMATORS))
    monkeypatch.delitem(__import__("sys").modules, "recipe_estimator", raising=False)
    base = overrides(
        tiny_model_path, task_files, "algorithm.adv_estimator=recipe_estimator:scaled_centring", "agent.n=2"
    )
    cfg = load(*base, "+algorithm.scaled_centring.scale=2.0")
    assert cfg.algorithm.adv_estimator == "scaled_centring" and not cfg.use_critic
    assert cfg.algorithm.options().scale == 2.0
    trainer = RayPPOTrainer(cfg, TEXT_STUB)
    batch = rollout_like_batch()
    batch.non_tensor_batch["uid"] = np.array(["a", "a"], dtype=object)
    batch.batch["outcome_scores"] = torch.tensor([0.7, 0.0])
    batch.batch["token_level_scores"] = batch.batch["token_level_rewards"] = torch.zeros(2, 4)
    trainer.compute_advantage(batch)
    # baseline 0.35; A = 2 * (s - 0.35) on each model token: +0.7 and -0.7
    assert torch.allclose(batch.batch["advantages"], torch.tensor([[0.7, 0.7, 0.0, 0.7], [-0.7, -0.7, 0.0, 0.0]]))
    assert load(*base).algorithm.options().scale == 1.0  # the file's own default
    with pytest.raises(ConfigError, match=r"config.algorithm.scaled_centring: unknown key\(s\) \['nope'\]"):
        load(*base, "+algorithm.scaled_centring.nope=1")
    with pytest.raises(ConfigError, match=r"algorithm.adv_estimator: advantage estimator 'recipe_estimator:x': "):
        load(*overrides(tiny_model_path, task_files, "algorithm.adv_estimator=recipe_estimator:x"))


RECIPE_REWARD = """
from verl.utils.reward_score import register


@register("turn_penalised_success")
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return float(extra_info["success"]) - 0.01 * extra_info["num_turns"]
"""


def test_a_reward_module_from_one_file_scores_the_rows(tiny_model_path, task_files, monkeypatch, tmp_path):
    """README's "add a reward" recipe with the module outside verl/utils/reward_score/: one file, named in
    algorithm.reward_score_fn as package.module:name."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils import reward_score

    (tmp_path / "recipe_reward.py").write_text(RECIPE_REWARD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(reward_score, "SUPPORTED_REWARD_SCORE_FNS", dict(reward_score.SUPPORTED_REWARD_SCORE_FNS))
    monkeypatch.delitem(__import__("sys").modules, "recipe_reward", raising=False)
    cfg = load(
        *overrides(tiny_model_path, task_files, "algorithm.reward_score_fn=recipe_reward:turn_penalised_success")
    )
    assert cfg.algorithm.reward_score_fn == "turn_penalised_success"
    batch = rollout_like_batch()
    RayPPOTrainer(cfg, TEXT_STUB).scorer.reward_manager(batch)
    # row 0: success in 2 turns -> 1 - 0.02 on its last model token; row 1: failure in 1 turn -> -0.01
    torch.testing.assert_close(batch.batch["outcome_scores"], torch.tensor([0.98, -0.01]))
    with pytest.raises(ConfigError, match=r"reward_score_fn: recipe_reward registers no reward named 'nope'; known"):
        load(*overrides(tiny_model_path, task_files, "algorithm.reward_score_fn=recipe_reward:nope"))


def test_step_wise_rows_are_padded_to_whole_mini_batches_with_rows_that_count_nowhere(tiny_model_path, task_files):
    trainer = make_trainer(tiny_model_path, task_files, *GROUPS_OF_TWO, "agent.history_window=1")  # mini-batch 4
    batch = rollout_like_batch()
    batch.non_tensor_batch["uid"] = np.array(["a", "b"], dtype=object)
    batch.non_tensor_batch["status"] = np.array(["done", "done"], dtype=object)
    padded = pad_to_mini_batches(batch, trainer.config)
    assert len(padded) == 4
    assert (
        padded.batch["response_mask"][2:].sum() == 0
        and padded.batch["input_ids"][2].tolist() == batch.batch["input_ids"][0].tolist()
    )
    nt = padded.non_tensor_batch
    assert list(nt["failed"]) == [False, False, True, True] and list(nt["uid"]) == ["a", "b", "padding-0", "padding-1"]
    assert list(nt["status"]) == ["done", "done", "padding", "padding"]
    assert pad_to_mini_batches(padded, trainer.config) is padded


def test_worker_calls_carry_only_the_keys_they_read():
    from verl.trainer.ppo.step_plan import for_worker

    d = packed_proto([[1, 2]], [[3, 4]], pad_id=0)
    d.batch["values"] = torch.zeros(1, 2)
    d.batch["token_level_scores"] = torch.zeros(1, 2)
    d.non_tensor_batch["turns"] = np.array([[{"role": "assistant", "text": "a long record"}]], dtype=object)
    d.meta_info.update(temperature=0.7, top_p=1.0, top_k=-1, metrics={"rollout/x": 1.0})
    sent = for_worker(d, "values")
    assert sorted(sent.batch) == ["attention_mask", "input_ids", "position_ids", "response_mask", "responses", "values"]
    assert sent.non_tensor_batch == {} and sent.meta_info == {"temperature": 0.7, "top_p": 1.0, "top_k": -1}


@pytest.mark.parametrize(
    "extra, rows, reused",
    [
        ([], 4, True),  # 4 tasks x 1 sample, mini-batch 4, one epoch: one optimiser step
        (["actor_rollout_ref.actor.ppo_epochs=2"], 4, False),
        (["actor_rollout_ref.actor.ppo_mini_batch_size=2"], 4, False),
        (["algorithm.use_kl_in_reward=true"], 4, False),  # the penalty reads the old log-probs before any update
        (["actor_rollout_ref.actor.reuse_on_policy_log_prob=false"], 4, False),
        ([], 8, False),  # step-wise rows padded past one mini-batch
    ],
)
def test_the_old_log_prob_pass_is_skipped_only_when_the_batch_makes_one_optimiser_step(
    tiny_model_path, task_files, extra, rows, reused
):
    trainer = make_trainer(tiny_model_path, task_files, *extra)
    assert plan_step(trainer.config, rows, True).old_log_probs_from_update is reused


@pytest.mark.parametrize(
    "extra, rows, asked",
    [
        ([], 4, True),  # one epoch of one mini-batch
        (["critic.model.enable_gradient_checkpointing=false"], 4, True),  # the critic checks its memory itself
        (["critic.ppo_epochs=2"], 4, False),
        (["critic.ppo_mini_batch_size=2"], 4, False),
        (["critic.reuse_values_forward=false"], 4, False),
        ([], 8, False),
    ],
)
def test_the_critic_is_asked_to_keep_its_values_forward_only_for_one_optimiser_step(
    tiny_model_path, task_files, extra, rows, asked
):
    trainer = make_trainer(tiny_model_path, task_files, *extra)
    assert plan_step(trainer.config, rows, True).keep_values_forward is asked


class SavingGroup:
    """A worker group whose checkpoint is one file."""

    def save_checkpoint(self, path):
        Path(path).mkdir(parents=True)
        (Path(path) / "weights.pt").write_text("w")


def test_keep_best_names_the_best_validation_and_pruning_spares_it(tiny_model_path, task_files, tmp_path):
    run = (f"trainer.output_dir={tmp_path}", *GROUPS_OF_TWO)
    trainer = make_trainer(tiny_model_path, task_files, "trainer.keep_best=true", "trainer.max_ckpt_to_keep=1", *run)
    trainer.actor_rollout_wg, trainer.critic_wg = SavingGroup(), None
    best = tmp_path / "checkpoints" / "best_dev.json"

    def validated(step, *rates):
        trainer.global_step = step
        metrics = {f"val/src{i}/success_rate": r for i, r in enumerate(rates)} | {"val/src0/count": 8.0}
        new = trainer.checkpoints.is_new_best(metrics)
        if step:
            trainer.save_checkpoint()
        if new:
            trainer.checkpoints.mark_best(step, metrics)
        return new, json.loads(best.read_text())

    assert validated(0, 0.25, 0.5) == (
        True,
        {"step": 0, "dev_success": 0.375, "model": str(Path(tiny_model_path).resolve())},
    )
    assert validated(1, 0.5, 0.25)[0] is False  # a tie keeps the earlier step
    assert validated(2, 0.5, 0.5) == (
        True,
        {"step": 2, "dev_success": 0.5, "model": str((tmp_path / "checkpoints" / "global_step_2").resolve())},
    )
    assert validated(3, 0.0, 0.5)[0] is False and validated(4, 0.25, 0.25)[0] is False
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("global_step_*")) == [
        "global_step_2",
        "global_step_4",
    ]
    assert validated(5, 1.0, 0.75)[1]["step"] == 5
    trainer.global_step = 6
    trainer.save_checkpoint()  # step 2 is no longer the best: pruned now
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("global_step_*")) == [
        "global_step_5",
        "global_step_6",
    ]

    off = make_trainer(tiny_model_path, task_files, *run)
    assert off.checkpoints.is_new_best({"val/src0/success_rate": 1.0}) is False  # keep_best off: never
    with pytest.raises(ConfigError, match="trainer.keep_best .* needs trainer.test_freq >= 1"):
        load(*overrides(tiny_model_path, task_files, "trainer.keep_best=true", "trainer.test_freq=0"))


def test_a_validation_of_several_batches_prints_its_progress(tiny_model_path, task_files, capsys, monkeypatch):
    from verl.trainer.ppo import validation

    trainer = make_trainer(
        tiny_model_path, task_files, *GROUPS_OF_TWO, "data.val_batch_size=2", "data.val_max_samples=-1"
    )
    trainer.collector.val_rollout = ScriptedRollout([[(1.0, 0.0), (0.0, 0.0)], [(1.0, 1.0), (0.5, 0.0)]])
    clock = iter([100.0, 110.0, 130.0, 130.0])  # start, after batch 1, after batch 2, the timing metric
    monkeypatch.setattr(validation.time, "perf_counter", lambda: next(clock))
    metrics = trainer.validate()
    assert capsys.readouterr().out.splitlines() == [
        "[val] 1/2 batches of tasks, 10 s (~10 s left)",
        "[val] 2/2 batches of tasks, 30 s",
    ]
    assert metrics["val/webshop/count"] == 8.0 and metrics["val/webshop/success_rate"] == 3 / 8
