#!/usr/bin/env python
"""How many expert episodes a trajectory token budget cuts, per env; the budget that cuts at most 5%.

    .venv/bin/python scripts/budget_cuts.py [--envs alfworld,sciworld] [--n 50] [--max_cut 0.05]
        [--out results/budget_cuts.json]

Each env's expert plays its first ``--n`` train tasks inside the agent (as `make_sft_data.py` does: the
agent's prompts, chat template and observation cuts) under a budget too large to bind.  An episode needs
the budget ``B`` that lets its last model turn start: the agent starts a turn only if

    response tokens so far + the observation turn + max_response_length + 1 <= B - max_prompt_length

so the episode needs ``B = max_prompt_length + (response tokens before its last model turn) +
max_response_length + 1``, and a budget cuts the episodes that need more.  The other limits
(turn cap, prompt, reply and observation lengths) are ``ppo_trainer.yaml``'s, as in RL.  Prints, per
env, the needed budgets (mean, 95th percentile, max), the share the env's current budget
(``EnvSpec.max_trajectory_length``) cuts, and the smallest multiple of 256 that cuts at most ``--max_cut``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_sft_data  # noqa: E402  (the expert-in-the-agent loop)

UNBOUNDED = 32768  # a budget no expert episode reaches
STEP = 256


def needed_budget(row: dict[str, Any], max_prompt_length: int, max_response_length: int) -> int:
    """The budget an episode (a `make_sft_data` sample) needs for its last model turn to start (module docstring)."""
    mask = row["loss_mask"]  # 0 on the prompt, then the agent's response mask (1 on model tokens)
    first_start = mask.index(1)  # the prompt's length
    last_start = max(i for i in range(first_start, len(mask)) if mask[i] == 1 and mask[i - 1] == 0)
    return max_prompt_length + (last_start - first_start) + max_response_length + 1


def smallest_budget(needs: Sequence[int], max_cut: float) -> int:
    """The smallest multiple of `STEP` that cuts at most ``max_cut`` of ``needs``."""
    ordered = sorted(needs)
    keep = math.ceil((1 - max_cut) * len(ordered))
    return math.ceil(ordered[keep - 1] / STEP) * STEP if keep else STEP


def measure(env: str, n: int, max_cut: float, tokenizer: str | None) -> dict[str, Any]:
    from openmanus_rl.envs.specs import get_env_spec

    argv = [
        "--env_name",
        env,
        "--n",
        str(n),
        "--out",
        "/dev/null",
        "--keep",
        "all",
        "--max_trajectory_length",
        str(UNBOUNDED),
    ] + (["--tokenizer", tokenizer] if tokenizer else [])
    args = make_sft_data.parse_args(argv)
    if args.tokenizer is None:
        from model_prep import prepare_default_model

        args.tokenizer = str(prepare_default_model())
    from transformers import AutoTokenizer

    start = time.perf_counter()
    with make_sft_data.env_server(env) as url:
        rows = make_sft_data.play(
            args,
            url,
            AutoTokenizer.from_pretrained(args.tokenizer),
            make_sft_data.choose_tasks(env, "train", n, False, 0),
        )
    played = [r for r in rows if not r["failed"] and 1 in r["loss_mask"]]
    needs = [needed_budget(r, args.max_prompt_length, args.max_response_length) for r in played]
    current = get_env_spec(env).max_trajectory_length
    won = [need for need, r in zip(needs, played) if r["success"]]
    return {
        "env": env,
        "episodes": len(played),
        "env_failures": len(rows) - len(played),
        "expert_success": sum(r["success"] for r in played) / len(played) if played else 0.0,
        "turn_cap": args.max_turns,
        "mean_need": sum(needs) / len(needs) if needs else 0.0,
        "p95_need": sorted(needs)[math.ceil(0.95 * len(needs)) - 1] if needs else 0,
        "max_need": max(needs, default=0),
        "current_budget": current,
        "cut_at_current": sum(need > current for need in needs) / len(needs) if needs else 0.0,
        "won_cut_at_current": sum(need > current for need in won) / len(won) if won else 0.0,
        "budget_for_max_cut": smallest_budget(needs, max_cut) if needs else None,
        "seconds": round(time.perf_counter() - start, 1),
    }


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    from agentgym.launcher import ENVS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(sorted(ENVS)), help="comma-separated envs (default: every env)")
    parser.add_argument("--n", type=int, default=50, help="expert episodes per env (its first n train tasks)")
    parser.add_argument("--max_cut", type=float, default=0.05, help="the share of episodes a budget may cut")
    parser.add_argument(
        "--tokenizer", default=None, help="Hugging Face folder with the tokenizer (default: the default model's)"
    )
    parser.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = []
    for env in [e.strip() for e in args.envs.split(",") if e.strip()]:
        rows.append(measure(env, args.n, args.max_cut, args.tokenizer))
        print(json.dumps(rows[-1]), flush=True)
    print(
        f"\n| env | episodes | expert success | turn cap | mean / p95 / max needed | budget | cut at it (won) | "
        f"budget cutting <= {args.max_cut:.0%} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['env']} | {r['episodes']} | {r['expert_success']:.2f} | {r['turn_cap']} | {r['mean_need']:.0f} / "
            f"{r['p95_need']} / {r['max_need']} | {r['current_budget']} | {r['cut_at_current']:.1%} "
            f"({r['won_cut_at_current']:.1%}) | {r['budget_for_max_cut']} |"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main()
