#!/usr/bin/env python
"""The README's table of environments: task counts per split and the expert's success on held-out tasks.

    .venv/bin/python scripts/env_table.py [--env_name all|a,b] [--n 50] [--max_turns 100]

For each env with a server: the number of tasks in its train / dev / test splits (its spec's task list), then
its expert played through the agent's own client (`evaluate_expert`) on the first ``--n`` test tasks, at most
``--max_turns`` actions an episode, against a server this script starts.  Prints a Markdown table, with the
success rate's Wilson 95% interval and the mean number of actions; every figure is measured in the run.
"""

from __future__ import annotations

import argparse
import time

from agentgym.launcher import ENVS
from agentgym.registry import get_env_spec
from agentgym.spawn import serve_subprocess
from agentgym.spec import load_object
from openmanus_rl.evaluation.stats import wilson_interval
from openmanus_rl.experts import evaluate_expert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env_name", default="all", help="comma-separated envs, or all (default %(default)s)")
    parser.add_argument("--n", type=int, default=50, help="test tasks per env (default %(default)s)")
    parser.add_argument("--max_turns", type=int, default=100, help="actions per episode (default %(default)s)")
    args = parser.parse_args()
    envs = sorted(ENVS) if args.env_name == "all" else [e.strip() for e in args.env_name.split(",")]
    print("| env | train | dev | test | expert success on the first test tasks (95% CI) | mean actions | seconds |")
    print("|---|---|---|---|---|---|---|")
    for env in envs:
        tasks = load_object(get_env_spec(env).tasks)
        sizes = {split: len(tasks(split)) for split in ("train", "dev", "test")}
        began = time.perf_counter()
        with serve_subprocess(env, timeout_s=120) as url:
            score = evaluate_expert(env, "test", args.n, url, max_turns=args.max_turns, request_timeout_s=120)
        low, high = wilson_interval(sum(score.successes), score.n)
        print(
            f"| `{env}` | {sizes['train']:,} | {sizes['dev']:,} | {sizes['test']:,} | "
            f"{sum(score.successes)}/{score.n} = {score.success_rate:.2f} [{low:.2f}, {high:.2f}] | "
            f"{sum(score.steps) / score.n:.1f} | {time.perf_counter() - began:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
