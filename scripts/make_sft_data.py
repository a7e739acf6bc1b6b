#!/usr/bin/env python
"""Write expert demonstrations as SFT samples, tokenised by the agent's own code.

    .venv/bin/python scripts/make_sft_data.py --env_name webshop --n 100 --action_format react \\
        --out data/sft/webshop_react_100.parquet [--server_url http://127.0.0.1:PORT] [--noise 0.0] [--seed 0] \\
        [--max_turns N] [--max_prompt_length N] [--max_response_length N] [--max_obs_length N] \\
        [--max_trajectory_length N] [--keep successful|failed|all] [--sample] [--tokenizer DIR]
        [--program PACKAGE.MODULE:FUNCTION]

``--env_name``, ``--action_format`` and the agent limits default to the ``agent`` section of
``verl/trainer/config/ppo_trainer.yaml`` (``--help`` shows the values), so a demonstration is cut as RL's
episodes are.

The env's expert (`openmanus_rl.experts`) plays TRAIN tasks only (the first
``n`` train ids, or with ``--sample`` a sample of ``n`` drawn with ``--seed``)
against a real server: ``--server_url``, or else a server this script starts
on a free port and stops at the end.  The expert answers in place of the
model inside `OpenManusAgent` (`ExpertGenerator`), so the prompt, chat
template, observation truncation and token budget are the agent's, and a
sample is exactly the sequence RL would train on.

With ``--program`` the episodes are an agent program's (``data.rollout=gateway``'s ``+agent.program``):
the program plays each task through the gateway, one episode at a time, on the env server it finds at
``task["extra_info"]["env_url"]``, and the expert answers its model calls
(`openmanus_rl.gateway.demonstrations.ProgramExpert`: the observation is the last user or tool
message, the reply a ``tool_call``), so a sample is exactly the sequence RL trains on when that
program plays.  The format is ``tool_call``; the turn cap is the program's own; an episode whose
program gives no success flag succeeds when its reward reaches 1.

Parquet columns, one row per kept episode (per sample of an episode, with ``--program``):

* ``input_ids`` (list[int]): prompt then response tokens, no padding;
* ``loss_mask`` (list[int], same length): 1 exactly on the expert's reply
  tokens (each ending with the end-of-turn token), 0 on the prompt and on
  the observation turns (the agent's ``response_mask``);
* ``task_id``, ``success``, ``env_reward``, ``num_turns``, ``status`` (how the
  episode ended: done / turn_limit / truncated), ``env_name``,
  ``action_format``, ``split`` ("train" or "dev", never "test").

``--keep``: ``successful`` keeps episodes whose env reward reached the env's
success reward, ``progress`` those whose env reward is above 0, ``failed`` the
unsuccessful ones, ``all`` every one (episodes whose env calls failed are never
kept). Unset: the env's own rule (``EnvSpec.demos_keep``; ``successful`` except
SciWorld's ``progress``).  The model's tokenizer is
``--tokenizer`` (a Hugging Face folder), by default the prepared
SmolLM2-135M-Instruct (`scripts/model_prep.py`, `prepare_default_model`).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

from agentgym.spawn import serve_subprocess

SERVER_START_TIMEOUT_S = 180.0
KEEP = ("successful", "progress", "failed", "all")
COLUMNS = "input_ids loss_mask task_id success env_reward num_turns status env_name action_format split".split()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The script's flags; an unset ``--max_turns`` becomes the env's own cap."""
    from verl.utils.yaml_defaults import add_yaml_argument

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_yaml_argument(parser, "--env_name", "agent.env_name")
    parser.add_argument("--n", type=int, default=100, help="episodes to play")
    parser.add_argument(
        "--split",
        choices=("train", "dev"),
        default="train",
        help="train: demonstrations for SFT; dev: held-out demonstrations (SFT dev loss). Never test.",
    )
    add_yaml_argument(
        parser, "--action_format", "agent.action_format", "the agent's action template (react | xml | tool_call)"
    )
    parser.add_argument("--out", required=True, help="the parquet file to write")
    parser.add_argument("--server_url", default=None, help="a running env server (default: start one)")
    parser.add_argument("--noise", type=float, default=0.0, help="expert noise in [0, 1] (0: the best expert)")
    parser.add_argument("--seed", type=int, default=0, help="agent seed (trajectory seeds, expert noise, --sample)")
    parser.add_argument("--sample", action="store_true", help="a seeded sample of n train ids instead of the first n")
    add_yaml_argument(
        parser, "--max_turns", "agent.max_turns", "unset: the env's own cap (EnvSpec.max_turns)", type=int
    )
    for limit in ("max_prompt_length", "max_response_length", "max_obs_length", "max_trajectory_length"):
        add_yaml_argument(parser, f"--{limit}", f"agent.{limit}", type=int)
    parser.add_argument("--keep", choices=KEEP, default=None, help="unset: the env's own rule (EnvSpec.demos_keep)")
    parser.add_argument(
        "--batch_size",
        type=int,
        default=64,
        help="episodes per agent call (at most the server's env cap, GET /health's max_envs)",
    )
    parser.add_argument("--tokenizer", default=None, help="Hugging Face folder with the model's tokenizer")
    parser.add_argument(
        "--program",
        default=None,
        metavar="PACKAGE.MODULE:FUNCTION",
        help="demonstrations of this agent program, played through the gateway (format tool_call)",
    )
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    if not 0.0 <= args.noise <= 1.0:
        parser.error("--noise must be in [0, 1]")
    if args.program:
        from openmanus_rl.gateway.config import load_program

        try:
            load_program(args.program)
        except ValueError as exc:
            parser.error(f"--program: {exc}")
        args.action_format = "tool_call"
    from openmanus_rl.envs.specs import get_env_spec

    spec = get_env_spec(args.env_name)
    args.max_turns = spec.turn_cap(args.max_turns)
    args.max_trajectory_length = spec.token_budget(args.max_trajectory_length)
    if args.keep is None:
        args.keep = spec.demos_keep
    return args


@contextmanager
def env_server(env_name: str) -> Iterator[str]:
    """An env server process on a free port (through the launcher), healthy on ``GET /``; stopped on exit."""
    with serve_subprocess(env_name, timeout_s=SERVER_START_TIMEOUT_S) as url:
        yield url


def choose_tasks(env_name: str, split: str, n: int, sample: bool, seed: int) -> list[int]:
    from openmanus_rl.experts import split_task_ids

    if split not in ("train", "dev"):
        raise ValueError(f"demonstrations come from train or dev tasks, never {split!r}")
    ids = list(split_task_ids(env_name, split))
    if n > len(ids):
        raise ValueError(f"--n {n} is more than the {len(ids)} {split} tasks of {env_name}")
    return sorted(random.Random(seed).sample(ids, n)) if sample else ids[:n]


def agent_config(args: argparse.Namespace, server_url: str) -> dict[str, Any]:
    """The agent's config under the command line's limits, handed the run's sampling (the expert ignores it)."""
    from openmanus_rl.evaluation.run import episode_limits
    from verl.workers.config import RolloutConfig

    parts = urlsplit(server_url)
    if not parts.scheme or not parts.hostname or not parts.port:
        raise ValueError(f"--server_url must look like http://host:port, got {server_url!r}")
    return {
        "env_name": args.env_name,
        "env_server_base": f"{parts.scheme}://{parts.hostname}",
        "env_ports": [parts.port],
        **episode_limits(args),
        "sampling": RolloutConfig().sampling,
        "seed": args.seed,
        "n": 1,
        "write_viewer": False,
    }


def row_tokens(out: Any, b: int) -> tuple[list[int], list[int]]:
    """Row ``b``'s real tokens (attention mask 1), unpadded, and its loss mask (0 on the prompt, the rollout's
    ``response_mask`` on the response)."""
    batch = out.batch
    attention = batch["attention_mask"][b]
    width = batch["prompts"].shape[1]
    prompt_len, response_len = int(attention[:width].sum()), int(attention[width:].sum())
    input_ids = batch["input_ids"][b][attention.bool()].tolist()
    loss_mask = [0] * prompt_len + batch["response_mask"][b][:response_len].tolist()
    assert len(input_ids) == len(loss_mask) == prompt_len + response_len
    return input_ids, loss_mask


def samples_from_batch(out: Any, env_name: str, action_format: str, split: str = "train") -> list[dict[str, Any]]:
    """One sample per row of a rollout batch (`row_tokens`): the built-in agent's, or a gateway rollout's (its
    episode reward is ``reward_total``; its ``success`` the program's flag, else reward >= 1)."""
    nt = out.non_tensor_batch
    reward = nt["env_reward"] if "env_reward" in nt else nt["reward_total"]
    rows = []
    for b in range(len(out)):
        input_ids, loss_mask = row_tokens(out, b)
        rows.append(
            {
                "input_ids": input_ids,
                "loss_mask": loss_mask,
                "task_id": int(nt["task_id"][b]),
                "success": bool(nt["success"][b]),
                "env_reward": float(reward[b]),
                "num_turns": int(nt["num_turns"][b]),
                "status": str(nt["status"][b]),
                "failed": bool(nt["failed"][b]),
                "env_name": env_name,
                "action_format": action_format,
                "split": split,
            }
        )
    return rows


def expert_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The expert's options: its noise, and the turn cap as its move budget where it plans within one."""
    from openmanus_rl.experts.registry import expert_takes

    kwargs: dict[str, Any] = {"noise": args.noise}
    if expert_takes(args.env_name, "max_steps"):
        kwargs["max_steps"] = args.max_turns
    return kwargs


def play(args: argparse.Namespace, server_url: str, tokenizer: Any, tasks: list[int]) -> list[dict[str, Any]]:
    """Every episode of ``tasks`` as a sample (kept or not)."""
    from openmanus_rl.agent import OpenManusAgent
    from openmanus_rl.envs.supervisor import env_cap
    from openmanus_rl.experts import ExpertGenerator
    from verl.protocol import DataProto

    generator = ExpertGenerator(tokenizer, args.env_name, args.action_format, expert_kwargs=expert_kwargs(args))
    rows: list[dict[str, Any]] = []
    batch_size = min(args.batch_size, env_cap(server_url, args.batch_size))
    with OpenManusAgent(tokenizer, generator, agent_config(args, server_url)) as agent:
        for step, start in enumerate(range(0, len(tasks), batch_size)):
            chunk = tasks[start : start + batch_size]
            batch = DataProto.from_dict(
                non_tensors={
                    "data_source": [args.env_name] * len(chunk),
                    "extra_info": [{"index": t, "split": args.split} for t in chunk],
                }
            )
            generator.reset()
            out = agent.run_llm_loop(batch, global_step=step)
            rows += samples_from_batch(out, args.env_name, args.action_format, args.split)
            print(f"[sft] played {len(rows)}/{len(tasks)} episodes", flush=True)
    return rows


def play_program(args: argparse.Namespace, server_url: str, tokenizer: Any, tasks: list[int]) -> list[dict[str, Any]]:
    """Every episode of ``tasks`` played by ``args.program`` through the gateway, the expert answering, as samples."""
    from openmanus_rl.gateway import GatewayConfig, GatewayRollout
    from openmanus_rl.gateway.demonstrations import ProgramExpert
    from verl.protocol import DataProto
    from verl.workers.config import RolloutConfig

    expert = ProgramExpert(tokenizer, args.env_name, expert_kwargs(args))
    config = GatewayConfig(
        program=args.program,
        sampling=RolloutConfig().sampling,  # greedy: played with do_sample=False
        n=1,
        concurrency=1,
        max_prompt_length=args.max_prompt_length,
        max_response_length=args.max_response_length,
        max_trajectory_length=args.max_trajectory_length,
        seed=args.seed,
    )
    batch = DataProto.from_dict(
        non_tensors={
            "data_source": [args.env_name] * len(tasks),
            "extra_info": [{"index": t, "split": args.split, "env_url": server_url} for t in tasks],
        }
    )
    with GatewayRollout(tokenizer, expert, config) as rollout:
        out = rollout.run_llm_loop(batch, do_sample=False)
    rows = samples_from_batch(out, args.env_name, "tool_call", args.split)
    print(f"[sft] played {len(tasks)} episodes of {args.program} ({len(rows)} samples)", flush=True)
    return rows


def keep(rows: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    ok = [r for r in rows if not r["failed"]]
    if mode == "successful":
        return [r for r in ok if r["success"]]
    if mode == "progress":
        return [r for r in ok if r["env_reward"] > 0]
    if mode == "failed":
        return [r for r in ok if not r["success"]]
    return ok


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import pandas as pd
    from transformers import AutoTokenizer

    if args.tokenizer is None:
        from model_prep import prepare_default_model

        args.tokenizer = str(prepare_default_model())
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    tasks = choose_tasks(args.env_name, args.split, args.n, args.sample, args.seed)
    start = time.perf_counter()
    player = play_program if args.program else play
    if args.server_url:
        rows = player(args, args.server_url, tokenizer, tasks)
    else:
        with env_server(args.env_name) as url:
            rows = player(args, url, tokenizer, tasks)
    kept = keep(rows, args.keep)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{c: r[c] for c in COLUMNS} for r in kept], columns=COLUMNS).to_parquet(out, index=False)
    scored = [r for r in rows if not r["failed"]]
    stats = {
        "played": len(rows),
        "env_failures": len(rows) - len(scored),
        "kept": len(kept),
        "keep": args.keep,
        "success_rate": sum(r["success"] for r in scored) / len(scored) if scored else 0.0,
        "mean_env_reward": sum(r["env_reward"] for r in scored) / len(scored) if scored else 0.0,
        "mean_tokens": sum(len(r["input_ids"]) for r in kept) / len(kept) if kept else 0.0,
        "max_tokens": max((len(r["input_ids"]) for r in kept), default=0),
        "out": str(out),
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(
        f"[sft] played {stats['played']} episodes ({stats['env_failures']} env failures), success rate "
        f"{stats['success_rate']:.3f}, mean env reward {stats['mean_env_reward']:.3f}; kept {stats['kept']} "
        f"({args.keep}) -> {out}"
    )
    print(json.dumps(stats))
    return stats


if __name__ == "__main__":
    main()
