"""Write ``<out>/<env>/{train,dev,test}.parquet`` from an environment's task list (deterministic).

    python scripts/prepare_data.py --env_name webshop [--out data] [--train_size N] [--dev_size N] [--test_size N]

The splits are disjoint: ``train`` for demonstrations and RL, ``dev`` for SFT
early stopping and RL validation, ``test`` for the final evaluation only.

Columns: ``data_source`` (the env name), ``prompt`` (chat messages with the
task text), ``ability``, ``reward_model`` (``{"style": "env", "ground_truth": ""}``:
the environment scores), ``extra_info`` (``{"index": <env task id>, "split": ...}``).
"""

import argparse
import sys
from pathlib import Path

import pandas as pd


from agentgym.registry import ENV_SPECS
from agentgym.spec import load_object


def rows(env: str, split: str, limit: int) -> list[dict]:
    tasks = load_object(ENV_SPECS[env].tasks)(split)  # the env's task list, declared in agentgym/<env>/spec.py
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env_name", default="webshop")
    parser.add_argument("--out", default="data")
    parser.add_argument("--train_size", type=int, default=-1, help="keep the first N train tasks (-1: all)")
    parser.add_argument("--dev_size", type=int, default=-1, help="keep the first N dev tasks (-1: all)")
    parser.add_argument("--test_size", type=int, default=-1, help="keep the first N test tasks (-1: all)")
    args = parser.parse_args()
    with_tasks = sorted(name for name, spec in ENV_SPECS.items() if spec.tasks)
    if args.env_name not in with_tasks:
        print(f"unknown env '{args.env_name}'; task lists exist for: {with_tasks}", file=sys.stderr)
        return 2
    folder = Path(args.out) / args.env_name
    folder.mkdir(parents=True, exist_ok=True)
    for split, limit in (("train", args.train_size), ("dev", args.dev_size), ("test", args.test_size)):
        frame = pd.DataFrame(rows(args.env_name, split, limit))
        path = folder / f"{split}.parquet"
        frame.to_parquet(path, index=False)
        print(f"wrote {len(frame)} {split} tasks to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
