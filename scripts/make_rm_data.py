"""Reward-model data: play an env's tasks with given policies, keep every trajectory with the env's verdict.

    python scripts/make_rm_data.py [--env_name webshop] [--policy NAME=HF_FOLDER ...] [--n 4] [--temperature 1.0]
        [--train_tasks 200] [--eval_tasks 100] [--dev_every 8] [--out data/rm/webshop]

Each policy plays the first ``--train_tasks`` tasks of the env's train split and the first ``--eval_tasks`` of
its dev split, ``--n`` sampled episodes a task, through the same agent, env server and token limits as RL (the
episode's token ids are exactly what the trainer's batch holds). No ``--policy``: the default warm start
(``scripts/warm_start.py``, cached). Writes under ``--out``:

- ``train.parquet``: train-split tasks whose id is not a multiple of ``--dev_every``;
- ``dev.parquet``: train-split tasks whose id is (the reward model's early stopping);
- ``eval.parquet``: the env's dev split (tasks RL never trains on): the reward model's reported AUC;

one row per trajectory: ``task_id``, ``policy``, ``sample``, ``success``, ``env_reward``, ``num_turns``,
``input_ids`` (prompt and response tokens, no padding), ``prompt_length``, ``turn_ends`` (the last model token
of each turn, as indices into ``input_ids``), ``data_source``; failed episodes (env errors) are dropped and
counted. Beside each, ``<split>_pairs.parquet``: every same-task pair whose env rewards differ, as row indices
``chosen`` (the higher reward) and ``rejected``. ``meta.json`` records the policies and counts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
COLUMNS = [
    "task_id",
    "policy",
    "sample",
    "success",
    "env_reward",
    "num_turns",
    "input_ids",
    "prompt_length",
    "turn_ends",
    "data_source",
]


def trajectory_rows(out: Any, policy: str) -> tuple[list[dict[str, Any]], int]:
    """The live rows of a ``run_llm_loop`` output as records (see the module docstring), and how many failed."""
    nt, batch = out.non_tensor_batch, out.batch
    width = batch["responses"].shape[1]
    prompt_width = batch["input_ids"].shape[1] - width
    rows, failed, copies = [], 0, {}
    for i in range(len(out)):
        task = int(nt["task_id"][i])
        copies[task] = copies.get(task, -1) + 1
        if bool(nt["failed"][i]):
            failed += 1
            continue
        mask = batch["attention_mask"][i].bool()
        prompt_length = int(mask[:prompt_width].sum())
        rows.append(
            {
                "task_id": task,
                "policy": policy,
                "sample": copies[task],
                "success": bool(nt["success"][i]),
                "env_reward": float(nt["env_reward"][i]),
                "num_turns": int(nt["num_turns"][i]),
                "input_ids": batch["input_ids"][i][mask].tolist(),
                "prompt_length": prompt_length,
                "turn_ends": [prompt_length + int(e) for e in nt["turn_ends"][i]],
                "data_source": str(nt["data_source"][i]),
            }
        )
    return rows, failed


def default_policies(env: str) -> dict[str, str]:
    """``{"warm_start": <the default warm start's folder>}`` (built and cached by ``scripts/warm_start.py``)."""
    base = (
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "prepare_model.py")], check=True, capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    warm = (
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "warm_start.py"), "--env_name", env, "--model", base],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    return {"warm_start": warm}


def play(
    policy: str, model: str, split: str, limit: int, args: argparse.Namespace, server_url: str
) -> tuple[list[dict], int]:
    """``--n`` sampled episodes of each of the first ``limit`` tasks of ``split`` by ``model``."""
    from transformers import AutoTokenizer

    from openmanus_rl.eval import build_parser
    from openmanus_rl.evaluation.run import builtin_agent, rollout_worker
    from openmanus_rl.evaluation.tasks import ensure_task_file
    from verl.utils.dataset import read_tasks

    ev = build_parser().parse_args(
        [
            "--model",
            model,
            "--env_name",
            args.env_name,
            "--split",
            split,
            "--n",
            str(args.n),
            "--temperature",
            str(args.temperature),
            "--seed",
            str(args.seed),
            "--kv_cache_gb",
            str(args.kv_cache_gb),
        ]
    )
    tasks = read_tasks(ensure_task_file(args.data_dir, args.env_name, split), max_rows=limit)
    tokenizer = AutoTokenizer.from_pretrained(model)
    worker = rollout_worker(model, ev)
    try:
        with builtin_agent(tokenizer, worker, ev, [server_url], max_in_flight=args.in_flight) as agent:
            from verl.utils.dataset import TaskDataLoader

            (batch,) = TaskDataLoader(tasks, len(tasks), shuffle=False).all_batches()
            out = agent.run_llm_loop(batch, do_sample=True, global_step=0)
    finally:
        worker.shutdown()
    return trajectory_rows(out, policy)


def write_split(frame: pd.DataFrame, out: Path, name: str) -> dict[str, Any]:
    frame = frame.reset_index(drop=True)
    frame.to_parquet(out / f"{name}.parquet", index=False)
    from verl.trainer.rm_trainer import same_task_pairs

    pairs = pd.DataFrame(
        [
            {"task_id": int(frame.at[c, "task_id"]), "chosen": c, "rejected": r}
            for c, r in same_task_pairs(frame["task_id"].tolist(), frame["env_reward"].tolist())
        ],
        columns=["task_id", "chosen", "rejected"],
    )
    pairs.to_parquet(out / f"{name}_pairs.parquet", index=False)
    counts = {
        "trajectories": len(frame),
        "tasks": int(frame["task_id"].nunique()) if len(frame) else 0,
        "success_rate": float(frame["success"].mean()) if len(frame) else 0.0,
        "pairs": len(pairs),
    }
    print(f"[rm-data] {name}: {counts}", flush=True)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env_name", default="webshop")
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="NAME=HF_FOLDER",
        help="a policy to play (repeatable); default: the default warm start",
    )
    parser.add_argument("--n", type=int, default=4, help="sampled episodes per task and policy")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--train_tasks", type=int, default=200, help="first N tasks of the train split")
    parser.add_argument("--eval_tasks", type=int, default=100, help="first N tasks of the dev split")
    parser.add_argument("--dev_every", type=int, default=8, help="train tasks with id %% K == 0 go to dev.parquet")
    parser.add_argument("--data_dir", default="data")
    parser.add_argument("--server_url", default=None, help="a running env server (default: start one)")
    parser.add_argument("--kv_cache_gb", type=float, default=4.0)
    parser.add_argument("--in_flight", type=int, default=64, help="episodes running at once")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="default data/rm/<env>")
    args = parser.parse_args(argv)
    if args.n < 2:
        parser.error("--n must be >= 2: pairs come from episodes of one task that end differently")
    policies = dict(item.split("=", 1) for item in args.policy) if args.policy else default_policies(args.env_name)
    for name, path in policies.items():
        if not (Path(path) / "config.json").is_file():
            parser.error(f"--policy {name}={path}: not a Hugging Face model folder (no config.json)")
    out = Path(args.out or Path(args.data_dir) / "rm" / args.env_name)
    out.mkdir(parents=True, exist_ok=True)

    from openmanus_rl.evaluation.servers import env_server

    start = time.perf_counter()
    played: dict[str, list[dict]] = {"train": [], "eval": []}
    failed = 0
    with ExitStack() as stack:
        url = args.server_url or stack.enter_context(env_server(args.env_name))
        for name, path in policies.items():
            for split, limit, key in (("train", args.train_tasks, "train"), ("dev", args.eval_tasks, "eval")):
                if limit <= 0:
                    continue
                rows, lost = play(name, path, split, limit, args, url)
                played[key] += rows
                failed += lost
                print(
                    f"[rm-data] {name} on {split}: {len(rows)} trajectories ({lost} failed), "
                    f"{time.perf_counter() - start:.0f}s",
                    flush=True,
                )
    train = pd.DataFrame(played["train"], columns=COLUMNS)
    held = train["task_id"] % args.dev_every == 0
    meta = {
        "env": args.env_name,
        "policies": policies,
        "n": args.n,
        "temperature": args.temperature,
        "seed": args.seed,
        "failed_episodes": failed,
        "wall_s": time.perf_counter() - start,
        "splits": {
            "train": write_split(train[~held], out, "train"),
            "dev": write_split(train[held], out, "dev"),
            "eval": write_split(pd.DataFrame(played["eval"], columns=COLUMNS), out, "eval"),
        },
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"[rm-data] wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
