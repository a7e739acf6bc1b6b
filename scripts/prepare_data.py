"""Write ``<out>/<env>/{train,dev,test}.parquet`` from an environment's task list (deterministic).

    python scripts/prepare_data.py --env_name webshop [--out data] [--train_size N] [--dev_size N] [--test_size N]
    python scripts/prepare_data.py --env_name babyai,webshop     # a mixed dataset: data/babyai+webshop/

With several envs (comma-separated) each split holds every env's rows of that
split (the sizes apply per env), taken in turn: the first task of each env in the
order named, then the second of each, and so on, so that the first rows
(validation's ``data.val_max_samples``, an evaluation's ``--limit``) hold every
env; each row's ``data_source`` names its env, which is how a mixed-env run routes it.

The splits are disjoint: ``train`` for demonstrations and RL, ``dev`` for SFT
early stopping and RL validation, ``test`` for the final evaluation only.

The folder also gets ``tasks.sha256``, the fingerprint of the envs' task lists
(``task_fingerprint``: every split's ids and texts, so it changes whenever an
env's tasks do, e.g. when WebShop's generated catalogue changes).  With
``--if_changed`` the files are rewritten only when that fingerprint or the sizes
differ from the ones they were written with; the training scripts run it that way
before every run, and the warm start keys its cache on the same fingerprint.

Columns: ``data_source`` (the env name), ``prompt`` (chat messages with the
task text), ``ability``, ``reward_model`` (``{"style": "env", "ground_truth": ""}``:
the environment scores), ``extra_info`` (``{"index": <env task id>, "split": ...}``).
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import pandas as pd

from agentgym.registry import ENV_SPECS
from agentgym.spec import load_object


def rows(env: str, split: str, limit: int) -> list[dict]:
    tasks = load_object(ENV_SPECS[env].tasks)(split)  # the env's task list, declared in agentgym/<env>/spec.toml
    if limit > 0:
        tasks = tasks[:limit]
    return [
        {
            "data_source": env,
            "prompt": [{"role": "user", "content": text}],
            "ability": "agent",
            "reward_model": {"style": "env", "ground_truth": ""},
            "extra_info": {"index": int(index), "split": split},
        }
        for index, text in tasks
    ]


def in_turn(per_env: list[list[dict]]) -> list[dict]:
    """The envs' rows taken in turn (row 0 of each, then row 1 of each, ...); an env whose rows ran out is skipped."""
    return [rows[i] for i in range(max(map(len, per_env), default=0)) for rows in per_env if i < len(rows)]


def task_fingerprint(env_names: list[str]) -> str:
    """sha256 (16 hex digits) of every named env's task list, all three splits, ids and texts."""
    digest = hashlib.sha256()
    for env in env_names:
        for split in ("train", "dev", "test"):
            tasks = load_object(ENV_SPECS[env].tasks)(split)
            digest.update(json.dumps([env, split, [[int(i), text] for i, text in tasks]]).encode())
    return digest.hexdigest()[:16]


def dataset_name(env_names: list[str]) -> str:
    """The folder name of a dataset of these envs: ``webshop``, or ``babyai+webshop`` for a mixed one."""
    return "+".join(env_names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env_name", default="webshop", help="an env, or several comma-separated (a mixed dataset)")
    parser.add_argument("--out", default="data")
    parser.add_argument("--train_size", type=int, default=-1, help="keep the first N train tasks of each env (-1: all)")
    parser.add_argument("--dev_size", type=int, default=-1, help="keep the first N dev tasks of each env (-1: all)")
    parser.add_argument("--test_size", type=int, default=-1, help="keep the first N test tasks of each env (-1: all)")
    parser.add_argument(
        "--if_changed",
        action="store_true",
        help="leave the files as they are when they were written from the same tasks and sizes",
    )
    args = parser.parse_args()
    with_tasks = sorted(name for name, spec in ENV_SPECS.items() if spec.tasks)
    envs = [name.strip() for name in args.env_name.split(",")]
    for env in envs:
        if env not in with_tasks:
            print(f"unknown env '{env}'; task lists exist for: {with_tasks}", file=sys.stderr)
            return 2
    if len(set(envs)) != len(envs):
        print(f"--env_name names an env twice: {args.env_name}", file=sys.stderr)
        return 2
    folder = Path(args.out) / dataset_name(envs)
    stamp = f"{task_fingerprint(envs)} {args.train_size} {args.dev_size} {args.test_size} in-turn\n"  # row order too
    stamp_file = folder / "tasks.sha256"
    written = all((folder / f"{split}.parquet").is_file() for split in ("train", "dev", "test"))
    if args.if_changed and written and stamp_file.is_file() and stamp_file.read_text() == stamp:
        print(f"{folder} is up to date (tasks {stamp.split()[0]})")
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    for split, limit in (("train", args.train_size), ("dev", args.dev_size), ("test", args.test_size)):
        frame = pd.DataFrame(in_turn([rows(env, split, limit) for env in envs]))
        path = folder / f"{split}.parquet"
        frame.to_parquet(path, index=False)
        print(f"wrote {len(frame)} {split} tasks to {path}")
    stamp_file.write_text(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
