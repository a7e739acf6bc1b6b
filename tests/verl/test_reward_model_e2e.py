"""A reward model end to end with the tiny model: `main_rm` trains and saves a folder whose scores reproduce its
reported dev AUC, and `main_ppo` trains a GRPO step on that model's scores (real Ray, a real reward-model worker),
and on a judge's (an OpenAI-style endpoint served by the test)."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from trainer_runs import REPO, check_ok, grpo_step_args, metric_rows, run_entry

pytestmark = pytest.mark.slow


def synthetic_trajectories(path: Path, tasks: range, seed: int) -> None:
    """Two trajectories a task: a shared prompt, then an action ending in token 200 (success) or 300 (failure)."""
    rng = np.random.RandomState(seed)
    rows = []
    for task in tasks:
        prompt = rng.randint(10, 100, size=12).tolist()
        for ok in (True, False):
            ids = prompt + rng.randint(10, 100, size=5).tolist() + [200 if ok else 300]
            rows.append(
                {
                    "task_id": task,
                    "input_ids": ids,
                    "turn_ends": [len(ids) - 1],
                    "success": ok,
                    "env_reward": float(ok),
                    "prompt_length": 12,
                }
            )
    pd.DataFrame(rows).to_parquet(path)


@pytest.fixture(scope="module")
def trained_rm(tiny_model_path, tmp_path_factory):
    data = tmp_path_factory.mktemp("rm_data")
    synthetic_trajectories(data / "train.parquet", range(0, 16), 0)
    synthetic_trajectories(data / "dev.parquet", range(16, 20), 1)
    out = tmp_path_factory.mktemp("rm_run")
    args = [
        f"model.path={tiny_model_path}",
        f"data.train_files={data}/train.parquet",
        f"data.val_files={data}/dev.parquet",
        f"data.test_files={data}/dev.parquet",
        "train.objective=pairwise",
        "train.batch_size=4",
        "train.epochs=2",
        "optim.lr=1e-3",
        "train.mixed_precision=float32",
        "trainer.num_threads=1",
        f"trainer.output_dir={out}",
    ]
    return out, data, check_ok(run_entry("main_rm", args, timeout_s=600)).stdout


def test_main_rm_saves_a_folder_that_reproduces_its_dev_auc(trained_rm):
    from verl.trainer.rm_trainer import read_trajectories
    from verl.utils.ranking import roc_auc
    from verl.workers.reward_model import load_score_model, position_scores, reward_model_problem

    out, data, stdout = trained_rm
    summary = json.loads((out / "rm_summary.json").read_text())
    assert (
        stdout.strip().splitlines()[-1] == str(out / "huggingface")
        and reward_model_problem(str(out / "huggingface")) is None
    )
    assert summary["train_units"] == 16 and summary["steps"] == 8 and summary["dev_trajectories"] == 8
    dev, _ = read_trajectories(str(data / "dev.parquet"), 3072)
    module = load_score_model(str(out / "huggingface")).eval()
    with torch.no_grad():
        scores = [
            float(position_scores(module, torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))[0, at])
            for ids, at in zip(dev.ids, dev.score_at)
        ]
    assert roc_auc(scores, dev.success) == summary["best_dev_auc"] == summary["test"]["auc"]
    assert summary["best_dev_auc"] > 0.5  # one token tells success from failure: two epochs learn some of it


def fixed_rollout_run(tiny_model_path, countdown_data, out, *extra) -> tuple[subprocess.CompletedProcess, dict]:
    """One GRPO step of the fixed rollout (each group: "2+2=4", right, and "2+2=5", wrong) with ``extra`` overrides;
    the process and the step's metrics."""
    args = grpo_step_args(
        tiny_model_path,
        countdown_data,
        out,
        "fixed_rollout:PLUGIN",
        "algorithm.reward_score_fn=exact_match",
        "actor_rollout_ref.rollout.name=hf",
        "reward_model.enable=true",
        "trainer.logger=[jsonl]",
        *extra,
    )
    proc = check_ok(run_entry("main_ppo", args, import_paths=[REPO / "tests" / "verl"]))
    (step,) = metric_rows(out)
    return proc, step


def test_grpo_trains_on_the_reward_models_score(trained_rm, tiny_model_path, countdown_data, tmp_path):
    rm_folder = trained_rm[0] / "huggingface"
    proc, step = fixed_rollout_run(
        tiny_model_path,
        countdown_data,
        tmp_path / "run",
        f"reward_model.model.path={rm_folder}",
        "reward_model.transform=raw",
    )
    assert "RewardModelWorker pids" in proc.stdout
    assert step["reward/exact_match/mean"] == 0.5  # the env's (here the rule's) reward, still logged
    assert step["reward_model/env_reward/mean"] == 0.5 and step["reward_model/failures"] == 0.0
    assert step["reward_model/agreement_pairs"] == 2.0  # each group: "4" (right) against "5" (wrong)
    assert step["timing_s/reward_model"] > 0 and "reward_model/score/std" in step
    # both replies differ in their last token only, so the model's scores differ and every group carries signal
    assert step["adv/equal_score_group_share"] == 0.0 and step["actor/grad_norm"] > 0


def test_grpo_trains_on_a_judges_score(tiny_model_path, countdown_data, tmp_path):
    """The judge says yes to "2+2=4" with probability 0.9 and to "2+2=5" with 0.2:
    each group's scores are exactly those."""
    import math

    from fastapi import FastAPI, Request

    from verl.utils.http_server import BackgroundServer

    app = FastAPI()
    asked: list[str] = []

    @app.get("/v1/models")
    async def models():
        return {"data": [{"id": "arithmetic-judge"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        content = (await request.json())["messages"][0]["content"]
        asked.append(content)
        p = 0.9 if "2+2=4" in content else 0.2
        top = [{"token": "Yes", "logprob": math.log(p)}, {"token": "No", "logprob": math.log(1 - p)}]
        return {"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": [{"top_logprobs": top}]}}]}

    server = BackgroundServer(app, "arithmetic-judge")
    try:
        _, step = fixed_rollout_run(
            tiny_model_path,
            countdown_data,
            tmp_path / "run",
            "reward_model.kind=judge",
            f"reward_model.judge.base_url={server.url}/v1",
            "reward_model.judge.max_concurrency=1",
        )
    finally:
        server.close()
    assert len(asked) == 2 and all(
        a.endswith("Answer with one word: Yes or No.\n") for a in asked
    )  # the default rubric
    assert step["reward/exact_match/mean"] == 0.5 and step["reward_model/failures"] == 0.0
    assert step["reward_model/score/mean"] == pytest.approx((0.9 + 0.2) / 2) and step["reward_model/agreement"] == 1.0
    assert (
        step["reward_model/judged"] == 4.0
        and step["reward_model/judge_calls"] == 2.0
        and step["reward_model/cache_hits"] == 2.0
    )
    assert step["adv/equal_score_group_share"] == 0.0 and step["actor/grad_norm"] > 0
