"""Evaluate a policy on held-out environment tasks, with confidence intervals; compare two result files.

Evaluate (greedy by default: one rollout per task at temperature 0)::

    python -m openmanus_rl.eval --model PATH [--env_name ENV] [--split test] [--data_dir data] [--limit N]
        [--n 1] [--temperature T] [--server_url URL[,URL...] | --num_servers 1] [--out results/NAME.json] [--seed 0]
        [--max_turns N] [--max_prompt_length N] [--max_response_length N] [--max_obs_length N]
        [--max_trajectory_length N] [--action_format FORMAT] [--engine vllm|hf] [--dtype DTYPE] [--threads N]
        [--device cpu|cuda] [--batch_size 64] [--schedule window|batches] [--kv_cache_gb 4] [--block_size N]
        [--request_timeout_s S] [--rollout_mode async|sync]
        [--program PACKAGE.MODULE:FUNCTION [--episode_timeout_s 600]] [--restart]

The flags shared with training (env, agent limits, sampling temperature, engine, dtype, threads, device,
request timeout) default to ``verl/trainer/config/ppo_trainer.yaml``'s values (``--help`` shows them).

Compare two evaluations task by task (paired, over the task ids both hold)::

    python -m openmanus_rl.eval compare A.json B.json [--seed 0] [--resamples 10000] [--json OUT.json]

Pool the seeds of an RL arm against their common baseline (each seed paired with it, then a bootstrap
over seeds and tasks)::

    python -m openmanus_rl.eval seeds BASE.json SEED1.json SEED2.json ... [--seed 0] [--resamples 10000] [--json OUT]

``--model`` is a Hugging Face folder, a trainer checkpoint step (``<ckpt>/global_step_K``
or ``<ckpt>/global_step_K/actor``, whose ``huggingface/`` export is used) or the
checkpoints folder itself (the step named in ``latest_checkpointed_iteration.txt``);
see `openmanus_rl.evaluation.checkpoints.resolve_model_path`.  Tasks are the rows of
``<data_dir>/<env>/<split>.parquet`` (``scripts/prepare_data.py`` writes it when missing),
the first ``--limit`` of them if given.  Without ``--server_url``, ``--num_servers`` servers for
the env are started on free ports and stopped at the end.

A result does not depend on how it was run: each trajectory's sampling seed comes from (``--seed``,
task id, copy), never from its place in a batch, so ``--batch_size``, ``--schedule``, the number of servers
and ``--rollout_mode`` leave every task's result as it is (greedy, and sampled for the same seed).
``--batch_size`` tasks are in flight at once: by default as a sliding window over the split (a task starts as
soon as one ends; ``agent.max_in_flight``), or with ``--schedule batches`` in separate rollouts of that many
tasks, each waiting for its slowest episode.

``--program package.module:function`` evaluates an agent program (``data.rollout=gateway``'s
``+agent.program``, see `openmanus_rl.gateway`) instead of the built-in agent: every episode of a batch
plays at once, each against its own gateway session on the engine, under the same token limits and
sampling; the program finds its env server at ``task["extra_info"]["env_url"]`` (the servers are
spread over tasks by task id).  Its result is the program's: reward as returned, success its
``info["success"]`` (else reward >= 1), turns its model calls; the built-in agent's flags
(``--action_format``, ``--max_turns``, ``--max_obs_length``, ``--rollout_mode``, ``--request_timeout_s``)
do not apply to it.

A killed evaluation loses nothing it finished: the built-in agent journals each rollout as it finishes
(``<out stem>.journal.jsonl``, `openmanus_rl.agent.journal`), and the same command run again takes those
back, replays the model turns of the unfinished ones into fresh envs, samples only the rest, and writes the
files an uninterrupted run writes (a journal of another model, task file or result-shaping flag is set aside;
``--restart`` ignores it). The journal is deleted once the files are written. Agent programs keep no journal.

``--n k`` with k > 1 samples k rollouts per task at ``--temperature`` and reports
mean@k (``success_rate``: the mean over tasks of each task's mean success) and
pass@k (the share of tasks with at least one success).

Episodes whose env failed (server errors) are counted in ``failed`` and left out
of every mean; a task whose samples all failed is not scored.

Output: a table on stdout, ``--out`` (JSON summary, with the run's ``config`` and the
``provenance`` needed to rerun it: model and task file hashes, package versions, git commit;
default ``results/<model>_<env>_<split>.json``) and ``<out stem>.tasks.jsonl`` beside it
(one line per rollout: ``task_id``, ``sample``, ``success``, ``env_reward``,
``turns``, ``invalid_actions``, ``failed`` ...).  Intervals: success with the
Wilson score interval when n = 1, else a percentile bootstrap over per-task mean
success; reward with a percentile bootstrap over tasks (2000 resamples, seeded);
``compare`` with a paired percentile bootstrap over tasks (10000 resamples,
seeded) and, when both files hold one rollout per task, McNemar's exact test; it prints
a ``warning:`` line when the two summaries record different task file hashes.
``seeds BASE SEED1 SEED2 ...`` compares each seed's result with the baseline, then pools the
gains with a bootstrap over seeds and tasks (`openmanus_rl.evaluation.seeds`).

The work is done in `openmanus_rl.evaluation`; this module is the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from openmanus_rl.evaluation.checkpoints import ModelPathError
from openmanus_rl.evaluation.compare import compare
from openmanus_rl.evaluation.report import format_comparison, format_seeds
from openmanus_rl.evaluation.run import evaluate
from openmanus_rl.evaluation.seeds import seeds_report
from openmanus_rl.evaluation.stats import COMPARE_RESAMPLES
from openmanus_rl.evaluation.tasks import SPLITS

__all__ = ["build_parser", "compare_main", "main", "seeds_main"]


def _statistics_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The flags ``compare`` and ``seeds`` share: the bootstrap's seed and resamples, and ``--json``."""
    parser = argparse.ArgumentParser(prog=f"python -m openmanus_rl.eval {prog}", description=description)
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--resamples", type=int, default=COMPARE_RESAMPLES)
    parser.add_argument("--json", default=None, help="also write the result here")
    return parser


def _print_and_write(result: dict[str, Any], text: str, json_path: str | None) -> dict[str, Any]:
    print(text)
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
    return result


def compare_main(argv: Sequence[str]) -> dict[str, Any]:
    """``compare A B [--seed] [--resamples] [--json OUT]``: print the comparison (and write it); return it."""
    parser = _statistics_parser("compare", "Paired comparison of two evaluation results (B - A)")
    parser.add_argument("a", help="result A: a summary .json (with its .tasks.jsonl beside it) or a .tasks.jsonl")
    parser.add_argument("b", help="result B, likewise")
    args = parser.parse_args(list(argv))
    result = compare(args.a, args.b, seed=args.seed, resamples=args.resamples)
    return _print_and_write(result, format_comparison(result), args.json)


def seeds_main(argv: Sequence[str]) -> dict[str, Any]:
    """``seeds BASE ARM [ARM ...] [--seed] [--resamples] [--json OUT]``: each arm (one RL seed) against the baseline,
    and the pooled gain (`openmanus_rl.evaluation.seeds`); print it (and write it); return it."""
    parser = _statistics_parser("seeds", "Seeds of an RL arm against one baseline: each paired, then pooled")
    parser.add_argument("base", help="the baseline's result (e.g. the warm start's .json)")
    parser.add_argument("arms", nargs="+", help="one result per seed of the arm, on the same tasks")
    args = parser.parse_args(list(argv))
    result = seeds_report(args.base, args.arms, seed=args.seed, resamples=args.resamples)
    return _print_and_write(result, format_seeds(result), args.json)


def build_parser() -> argparse.ArgumentParser:
    """The evaluation's flags; the agent's limits, the engine and its device default to
    ``ppo_trainer.yaml``'s values."""
    from verl.utils.precision import DTYPE_CHOICES
    from verl.utils.yaml_defaults import add_yaml_argument

    parser = argparse.ArgumentParser(
        prog="python -m openmanus_rl.eval",
        description=__doc__.split("\n\n")[0],
        epilog="compare: python -m openmanus_rl.eval compare A.json B.json; "
        "seeds: python -m openmanus_rl.eval seeds BASE.json SEED1.json SEED2.json ...",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="HF folder, <ckpt>/global_step_K[/actor], or the checkpoints folder (latest step)",
    )
    add_yaml_argument(parser, "--env_name", "agent.env_name")
    parser.add_argument("--split", default="test", choices=SPLITS)
    parser.add_argument("--data_dir", default="data")
    parser.add_argument("--limit", type=int, default=-1, help="evaluate the first N tasks (default: the whole split)")
    parser.add_argument("--n", type=int, default=1, help="rollouts per task; 1: greedy, >1: sampled (mean@k, pass@k)")
    add_yaml_argument(
        parser,
        "--temperature",
        "actor_rollout_ref.rollout.temperature",
        "sampling temperature when --n > 1",
        type=float,
    )
    parser.add_argument(
        "--server_url",
        default=None,
        help="running env server(s), comma-separated: the agent spreads the tasks over them "
        "(default: start --num_servers servers on free ports)",
    )
    parser.add_argument(
        "--num_servers", type=int, default=1, help="env servers to start when --server_url is not given"
    )
    parser.add_argument("--out", default=None, help="summary JSON (default results/<model>_<env>_<split>.json)")
    parser.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
    add_yaml_argument(
        parser,
        "--max_turns",
        "agent.max_turns",
        "turns per episode; unset: the env's own cap (EnvSpec.max_turns)",
        type=int,
    )
    for limit in ("max_prompt_length", "max_response_length", "max_obs_length", "max_trajectory_length"):
        add_yaml_argument(parser, f"--{limit}", f"agent.{limit}", type=int)
    add_yaml_argument(parser, "--action_format", "agent.action_format")
    add_yaml_argument(parser, "--engine", "actor_rollout_ref.rollout.name", choices=("vllm", "hf"))
    add_yaml_argument(parser, "--dtype", "actor_rollout_ref.rollout.dtype", choices=DTYPE_CHOICES)
    add_yaml_argument(parser, "--threads", "actor_rollout_ref.num_threads", "engine / torch threads", type=int)
    add_yaml_argument(parser, "--device", "actor_rollout_ref.device", "where the engine runs", choices=("cpu", "cuda"))
    parser.add_argument("--batch_size", type=int, default=64, help="tasks in flight at once; <= 0: all at once")
    parser.add_argument(
        "--schedule",
        default="window",
        choices=("window", "batches"),
        help="window: one rollout of every task, the next task starting as soon as one ends (async "
        "rollout or --program); batches: one rollout per --batch_size tasks, each waiting for its "
        "slowest episode",
    )
    parser.add_argument(
        "--kv_cache_gb",
        type=float,
        default=4.0,
        help="the vLLM engine's KV cache (GiB): room for the trajectories in flight; larger than training's "
        "actor_rollout_ref.rollout.kv_cache_gb (0.5), whose engine shares the box with the trainer's workers",
    )
    add_yaml_argument(
        parser,
        "--block_size",
        "actor_rollout_ref.rollout.block_size",
        "the vLLM engine's KV cache block in tokens: a prefix-cache hit covers whole blocks (default 32 on CPU)",
        type=int,
    )
    add_yaml_argument(
        parser,
        "--rollout_mode",
        "agent.rollout_mode",
        "async: each trajectory moves on as soon as its "
        "reply is back; sync: one batched generation per turn (the results are the same)",
        choices=("async", "sync"),
    )
    add_yaml_argument(
        parser,
        "--request_timeout_s",
        "agent.request_timeout_s",
        "env server request timeout (s); an env's /reset may wait longer (EnvSpec.reset_timeout_s: ALFWorld)",
        type=float,
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="ignore what a killed run of this evaluation left in <out stem>.journal.jsonl (by default the "
        "rollouts it finished are taken back and only the rest are played)",
    )
    parser.add_argument(
        "--program",
        default=None,
        metavar="PACKAGE.MODULE:FUNCTION",
        help="play the tasks with this agent program through the gateway instead of the built-in agent "
        "(data.rollout=gateway's +agent.program); it finds its env server at "
        "task['extra_info']['env_url']",
    )
    add_yaml_argument(
        parser,
        "--episode_timeout_s",
        "agent.episode_timeout_s",
        "with --program: an episode still running after this long is a failed rollout",
        type=float,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``compare A B`` or an evaluation; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compare":
        compare_main(argv[1:])
        return 0
    if argv and argv[0] == "seeds":
        seeds_main(argv[1:])
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    if args.limit == 0 or args.limit < -1:
        parser.error("--limit must be a positive number of tasks (or -1: all)")
    from openmanus_rl.envs import get_env_spec

    args.max_trajectory_length = get_env_spec(args.env_name).token_budget(args.max_trajectory_length)
    if args.program:
        from openmanus_rl.gateway.config import load_program

        try:
            load_program(args.program)
        except ValueError as exc:
            parser.error(f"--program: {exc}")
        if args.episode_timeout_s <= 0:
            parser.error("--episode_timeout_s must be > 0")
    if args.num_servers < 1 or (args.server_url and args.num_servers != 1):
        parser.error("--num_servers must be >= 1, and is for servers started here: not with --server_url")
    try:
        evaluate(args)
    except ModelPathError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
