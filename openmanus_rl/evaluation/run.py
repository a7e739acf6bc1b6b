"""The evaluation loop: resolve the model, read the tasks, start a server and the engine, roll out, write the files."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from openmanus_rl.evaluation.checkpoints import model_label, resolve_model_path
from openmanus_rl.evaluation.provenance import provenance
from openmanus_rl.evaluation.report import format_summary
from openmanus_rl.evaluation.results import (
    TaskResult,
    journal_path_for,
    task_results_from_batch,
    task_results_from_episodes,
    tasks_path_for,
)
from openmanus_rl.evaluation.servers import env_server, server_url_list
from openmanus_rl.evaluation.summary import ci_methods, summarize
from openmanus_rl.evaluation.tasks import ensure_task_file
from verl.utils.jsonl import write_jsonl, write_text_atomically

if TYPE_CHECKING:
    from verl.workers.rollout.base import Sampling

# the agent settings a command line (eval, make_sft_data) carries under the agent section's own names
EPISODE_LIMITS = (
    "max_turns",
    "max_prompt_length",
    "max_response_length",
    "max_obs_length",
    "max_trajectory_length",
    "action_format",
)


def episode_limits(args: argparse.Namespace) -> dict[str, Any]:
    """``{name: args.<name>}`` for each of `EPISODE_LIMITS`: the turn cap, token limits and action format of a
    command line, as the agent section's keys."""
    return {name: getattr(args, name) for name in EPISODE_LIMITS}


def sampling(args: argparse.Namespace) -> Sampling:
    """The `Sampling` the evaluation hands its rollout: ``--temperature`` with the rollout section's top-p and
    top-k, checked as ``actor_rollout_ref.rollout`` is (a run with ``--n 1`` is greedy whatever it says)."""
    from verl.utils.typed_config import from_dict
    from verl.workers.config import RolloutConfig

    return from_dict(RolloutConfig, {"temperature": args.temperature}, "actor_rollout_ref.rollout").sampling


def rollout_worker(model_path: str, args: argparse.Namespace) -> Any:
    """An in-process rollout-only `ActorRolloutRefWorker` with its engine started."""
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    worker = ActorRolloutRefWorker(
        {
            "model": {"path": model_path},
            "num_threads": args.threads,
            "device": args.device,
            "seed": args.seed,
            "rollout": {
                "name": args.engine,
                "dtype": args.dtype,
                "kv_cache_gb": args.kv_cache_gb,
                "seed": args.seed,
                "block_size": args.block_size,
                "max_model_len": args.max_trajectory_length + 64,
            },
        },
        role="rollout",
    )
    worker.init_model()
    return worker


def builtin_agent(
    tokenizer: Any, worker: Any, args: argparse.Namespace, server_urls: list[str], max_in_flight: int = 0
) -> Any:
    """The built-in `OpenManusAgent` under the evaluation's limits, spreading tasks over ``server_urls``, with at
    most ``max_in_flight`` trajectories running at once (0: all; async rollout only)."""
    from openmanus_rl.agent import OpenManusAgent

    return OpenManusAgent(
        tokenizer,
        worker,
        {
            "env_name": args.env_name,
            "env_servers": {args.env_name: server_urls},
            "env_ports": [],
            "n": args.n,
            **episode_limits(args),
            "sampling": sampling(args),
            "seed": args.seed,
            "write_viewer": False,
            "request_timeout_s": args.request_timeout_s,
            "rollout_mode": args.rollout_mode,
            "max_in_flight": max_in_flight,
            "progress_every_s": PROGRESS_EVERY_S,
        },
    )


def fit_servers(batch_size: int, n: int, server_urls: list[str]) -> int:
    """Tasks per batch such that their ``batch_size * n`` trajectories fit the servers' env caps at once
    (`openmanus_rl.envs.supervisor.env_cap`; SciWorld holds 16): beyond the caps episodes wait at 503 and fail."""
    from openmanus_rl.envs.supervisor import env_cap

    capacity = sum(env_cap(url, default=batch_size * n) for url in server_urls)
    if batch_size * n <= capacity:
        return batch_size
    fitted = max(1, capacity // n)
    print(
        f"[eval] the server(s) hold {capacity} envs at once (GET /health max_envs): {fitted} tasks per batch, "
        f"not {batch_size}",
        flush=True,
    )
    return fitted


def program_rollout(tokenizer: Any, worker: Any, args: argparse.Namespace, batch_size: int, hf: Path) -> Any:
    """``args.program`` playing the episodes through the gateway (`openmanus_rl.gateway.GatewayRollout`): every
    episode of a batch at once, under the evaluation's token limits and `sampling`; ``hf`` is the resolved model
    folder."""
    from openmanus_rl.gateway import GatewayConfig, GatewayRollout

    config = GatewayConfig(
        program=args.program,
        episode_timeout_s=args.episode_timeout_s,
        n=args.n,
        concurrency=batch_size * args.n,
        max_prompt_length=args.max_prompt_length,
        max_response_length=args.max_response_length,
        max_trajectory_length=args.max_trajectory_length,
        sampling=sampling(args),
        seed=args.seed,
    )
    return GatewayRollout(tokenizer, worker, config, model=model_label(hf))


def with_env_urls(batch: Any, server_urls: list[str]) -> Any:
    """``batch`` with each row's ``extra_info["env_url"]`` set: the env server its agent program plays on, spread
    over ``server_urls`` by task id (``extra_info["index"]``, else the row)."""
    from openmanus_rl.agent.output import objects

    rows = []
    for row, extra in enumerate(batch.non_tensor_batch["extra_info"]):
        extra = dict(extra) if isinstance(extra, dict) else {}
        extra["env_url"] = server_urls[int(extra.get("index", row)) % len(server_urls)]
        rows.append(extra)
    return dataclasses.replace(batch, non_tensor_batch={**batch.non_tensor_batch, "extra_info": objects(rows)})


def prefix_cache_use(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, float] | None:
    """Prompt tokens looked up in the engine's prefix cache between two readings (`prefix_cache_stats`):
    ``queries``, ``hits`` and ``hit_rate`` = hits / queries; None where the engine does not count them."""
    from verl.workers.rollout.base import prefix_cache_delta

    delta = prefix_cache_delta(before, after)
    if delta is None:
        return None
    queries, hits = delta["queries"], delta["hits"]
    return {"queries": queries, "hits": hits, "hit_rate": hits / queries if queries else 0.0}


PROGRESS_EVERY_S = 60.0  # how often a rollout of the evaluation prints where it is

RESULT_FLAGS = (
    "env_name",
    "split",
    "n",
    "temperature",
    "seed",
    *EPISODE_LIMITS,
    "engine",
    "dtype",
    "device",
    "threads",
    "block_size",
)  # the flags that can change a trajectory (not: batch size, schedule, servers, rollout mode, timeouts)


def journal_key(args: argparse.Namespace, recorded: dict[str, Any]) -> dict[str, Any]:
    """What an evaluation's journal belongs to: the model's and the task file's hashes, the package versions
    and `RESULT_FLAGS` (a journal of any other evaluation is set aside, never mixed in)."""
    return {
        "model_sha256": recorded["model_sha256"],
        "task_file_sha256": recorded["task_file_sha256"],
        "versions": recorded["versions"],
        "flags": {name: getattr(args, name) for name in RESULT_FLAGS},
    }


def open_journal(args: argparse.Namespace, out_path: Path, recorded: dict[str, Any]) -> Any:
    """The built-in agent's journal beside ``out_path`` (`journal_path_for`): what a killed run of the same
    evaluation finished is taken back, unless ``args.restart``; None for an agent program (it keeps none)."""
    from openmanus_rl.agent.journal import RolloutJournal

    if args.program:
        return None
    path = journal_path_for(out_path)
    if args.restart:
        path.unlink(missing_ok=True)
    journal = RolloutJournal(path, journal_key(args, recorded))
    if journal.finished or journal.turns:
        turns = sum(len(t) for t in journal.turns.values())
        print(
            f"[eval] resuming from {path}: {len(journal.finished)} rollouts finished, {turns} model turns "
            "journaled (--restart: start over)",
            flush=True,
        )
    return journal


def default_out(hf: Path, env: str, split: str) -> Path:
    """``results/<model label>_<env>_<split>.json`` (see `model_label`)."""
    return Path("results") / f"{model_label(hf)}_{env}_{split}.json"


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Run the evaluation ``args`` describe (``openmanus_rl.eval.build_parser``); write the files; return the summary.

    Writes ``args.out`` (or `default_out`): the summary JSON, with ``config`` (every flag, the resolved model
    and server) and ``provenance`` (`openmanus_rl.evaluation.provenance.provenance`, taken before the model
    loads); and ``<out stem>.tasks.jsonl`` beside it, one `TaskResult` a line, in task order. While it runs,
    the built-in agent journals every rollout as it finishes (`open_journal`), so a killed evaluation run
    again plays only what it had not finished and writes the same files; the journal goes once they are
    written.
    """
    from openmanus_rl.envs import get_env_spec
    from verl.utils.dataset import TaskDataLoader, read_tasks

    get_env_spec(args.env_name)  # unknown env: fail before loading anything
    hf = resolve_model_path(args.model)
    print(
        f"[eval] model: {hf}" + ("" if Path(args.model).resolve() == hf else f" (resolved from {args.model})"),
        flush=True,
    )
    task_path = ensure_task_file(args.data_dir, args.env_name, args.split)
    frame = read_tasks(task_path, max_rows=args.limit)
    if len(frame) == 0:
        raise ValueError(f"no tasks in {task_path}")
    recorded = provenance(hf, task_path)
    batch_size = len(frame) if args.batch_size <= 0 else min(args.batch_size, len(frame))
    greedy = args.n == 1
    out_path = Path(args.out) if args.out else default_out(hf, args.env_name, args.split)
    journal = open_journal(args, out_path, recorded)

    from transformers import AutoTokenizer

    results: list[TaskResult] = []
    start = time.perf_counter()
    with ExitStack() as stack:
        if args.server_url:
            server_urls = server_url_list(args.server_url)
        else:
            from agentgym.launcher import ENVS

            if args.env_name not in ENVS:
                raise ValueError(
                    f"no server can be started here for env {args.env_name!r} (servable: {sorted(ENVS)}); "
                    "start one and pass --server_url"
                )
            server_urls = [stack.enter_context(env_server(args.env_name)) for _ in range(args.num_servers)]
        batch_size = fit_servers(batch_size, args.n, server_urls)
        window = args.schedule == "window" and (args.program or args.rollout_mode == "async")
        tokenizer = AutoTokenizer.from_pretrained(str(hf))
        worker = rollout_worker(str(hf), args)
        stack.callback(worker.shutdown)
        if args.program:
            agent = stack.enter_context(program_rollout(tokenizer, worker, args, batch_size, hf))
            how = f"the agent program {args.program} through the gateway"
        else:
            agent = stack.enter_context(
                builtin_agent(tokenizer, worker, args, server_urls, batch_size * args.n if window else 0)
            )
            how = f"{args.rollout_mode} rollout"
        # a window: one call, at most batch_size tasks' episodes running at once, the next starting as one ends
        batches = TaskDataLoader(frame, len(frame) if window else batch_size, shuffle=False).all_batches()
        layout = (
            f"a window of {batch_size} tasks in flight"
            if window
            else f"{len(batches)} batch(es) of up to {batch_size} tasks"
        )
        print(
            f"[eval] {len(frame)} {args.env_name}/{args.split} tasks x n={args.n} "
            f"({'greedy' if greedy else f'sampled at temperature {args.temperature}'}), {layout}; "
            f"server(s) {', '.join(server_urls)}; engine {args.engine}; {how}",
            flush=True,
        )
        cache_before = worker.prefix_cache_stats()
        restored = replayed = 0
        for index, batch in enumerate(batches):
            # seeds come from (seed, task, copy), never from a place in a batch: the same samples whatever the
            # batch size or order
            if args.program:
                out = agent.run_llm_loop(with_env_urls(batch, server_urls), do_sample=not greedy, global_step=0)
                results += task_results_from_episodes(out)
            else:
                out = agent.run_llm_loop(batch, do_sample=not greedy, global_step=0, journal=journal)
                results += task_results_from_batch(out, args.n)
                restored += int(out.meta_info["metrics"]["journal/restored"])
                replayed += int(out.meta_info["metrics"]["journal/replayed_turns"])
            done = [r for r in results if not r.failed]
            print(
                f"[eval] batch {index + 1}/{len(batches)}: {len({r.task_id for r in results})} tasks, "
                f"success so far {np.mean([r.success for r in done]) if done else float('nan'):.3f}, "
                f"failed {len(results) - len(done)}, {time.perf_counter() - start:.0f}s",
                flush=True,
            )
        cache = prefix_cache_use(cache_before, worker.prefix_cache_stats())
        if restored or replayed:
            print(f"[eval] from the journal: {restored} finished rollouts, {replayed} model turns replayed", flush=True)

    summary = {"model": str(hf), "env": args.env_name, "split": args.split, "n": args.n, "greedy": greedy}
    summary.update(summarize(results, args.n, args.seed))
    by_source: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        by_source[r.data_source].append(r)
    summary["per_source"] = {source: summarize(rows, args.n, args.seed) for source, rows in sorted(by_source.items())}
    summary["ci_method"] = ci_methods(args.n, args.seed)
    summary["wall_s"] = time.perf_counter() - start
    summary["tasks_per_s"] = len({r.task_id for r in results}) / summary["wall_s"]
    summary["prefix_cache"] = cache
    summary["tasks_file"] = tasks_path_for(out_path).name
    summary["config"] = {
        **vars(args),
        "model_arg": args.model,
        "model": str(hf),
        "server_urls": server_urls,
        "out": str(out_path),
    }
    summary["provenance"] = recorded

    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl([r.to_json() for r in results], tasks_path_for(out_path))
    write_text_atomically(out_path, json.dumps(summary, indent=2) + "\n")
    if journal is not None:
        journal.remove()
    print(format_summary(summary))
    print(f"[eval] wrote {out_path} and {tasks_path_for(out_path)}")
    return summary
