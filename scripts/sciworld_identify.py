"""How often the SciWorld expert plays a winning gold path, per task type, and where it cannot know which.

    python scripts/sciworld_identify.py [--per_task 5] [--split test] [--tasks 7-1,7-2] [--out FILE.json]

For the first ``--per_task`` variations of every task type in the split, it loads the variation (the "real"
env), shows the expert its first observation (task description + first ``look around``), and plays the
expert's pick of gold path in the real env, up to `MAX_ACTIONS` actions. Every variation that starts alike
with the real one (the same description and the same first-room words) is a tie the first observation cannot
break. Per task type it prints: variations examined, how many start alike with another variation, how many have
a gold path longer than the action limit (which no gold-path player finishes), and how many the expert wins. Two JVMs:
one for the real envs, the expert's own; each candidate's first room is loaded once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from agentgym.registry import get_env_spec
from agentgym.sciworld.data import task, task_ids
from agentgym.sciworld.env import SciWorldEnv
from agentgym.sciworld.expert import SciWorldExpert
from openmanus_rl.envs.client import first_observation

MAX_ACTIONS = 100  # the expert table's action limit (docs/environments.md)


def wins(env: SciWorldEnv, observation: str, play: SciWorldExpert) -> bool:
    """Play ``play`` in ``env``, just reset and showing ``observation``; True when it completes the task."""
    play.reset()
    for _ in range(MAX_ACTIONS):
        result = env.step(play.act(observation))
        if result.done:
            return result.extra["score"] >= 100
        observation = result.observation
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per_task", type=int, default=5, help="variations per task type (the split's first)")
    parser.add_argument("--split", default="test", choices=["train", "dev", "test"])
    parser.add_argument("--tasks", default="", help="only these ScienceWorld task ids, comma-separated (e.g. 7-1,7-2)")
    parser.add_argument("--out", type=Path, default=None, help="write the per-type counts here as JSON")
    args = parser.parse_args(argv)

    by_type: dict[str, list[int]] = defaultdict(list)
    wanted = set(filter(None, args.tasks.split(",")))
    for data_idx in task_ids(args.split):
        if wanted and task(data_idx).task_id not in wanted:
            continue
        if len(by_type[task(data_idx).title]) < args.per_task:
            by_type[task(data_idx).title].append(data_idx)

    env, expert = SciWorldEnv(max_steps=MAX_ACTIONS), SciWorldExpert()
    rows: dict[str, Counter] = {}
    started = time.monotonic()
    try:
        for title, ids in by_type.items():
            row = rows[title] = Counter()
            for data_idx in ids:
                env.reset(data_idx, gold_path=True)
                row["gold_path_too_long"] += len(env.gold_path()) > MAX_ACTIONS
                observation = first_observation(get_env_spec("sciworld"), env.reset(data_idx))
                row["n"] += 1
                row["starts_alike"] += len(expert.candidates(observation)) > 1
                row["expert_wins"] += wins(env, observation, expert)
            print(
                f"{title:45s} {row['n']:3d} {row['starts_alike']:3d} {row['gold_path_too_long']:3d} "
                f"{row['expert_wins']:3d}  ({time.monotonic() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    finally:
        expert.close()
        env.close()
    total = sum(rows.values(), Counter())
    print(f"| task type | variations | start alike with another | gold path over {MAX_ACTIONS} actions | expert wins |")
    print("|---|---|---|---|---|")
    for title, row in [*rows.items(), ("all", total)]:
        print(f"| {title} | {row['n']} | {row['starts_alike']} | {row['gold_path_too_long']} | {row['expert_wins']} |")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "split": args.split,
                    "per_task": args.per_task,
                    "max_actions": MAX_ACTIONS,
                    "types": {t: dict(r) for t, r in rows.items()},
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
