"""Evaluate a policy on held-out environment tasks, with confidence intervals; compare two result files.

Evaluate (greedy by default: one rollout per task at temperature 0)::

    python -m openmanus_rl.eval --model PATH [--env_name ENV] [--split test] [--data_dir data] [--limit N]
        [--n 1] [--temperature T] [--server_url http://127.0.0.1:PORT] [--out results/NAME.json] [--seed 0]
        [--max_turns N] [--max_prompt_length N] [--max_response_length N] [--max_obs_length N]
        [--max_trajectory_length N] [--action_format FORMAT] [--engine vllm|hf] [--dtype DTYPE] [--threads N]
        [--device cpu|cuda] [--batch_size 64] [--kv_cache_gb 4] [--request_timeout_s S]

The flags shared with training (env, agent limits, sampling temperature, engine, dtype, threads, device,
request timeout) default to ``verl/trainer/config/ppo_trainer.yaml``'s values (``--help`` shows them).

Compare two evaluations task by task (paired, over the task ids both hold)::

    python -m openmanus_rl.eval compare A.json B.json [--seed 0] [--resamples 10000] [--json OUT.json]

``--model`` is a Hugging Face folder, a trainer checkpoint step (``<ckpt>/global_step_K``
or ``<ckpt>/global_step_K/actor``, whose ``huggingface/`` export is used) or the
checkpoints folder itself (the step named in ``latest_checkpointed_iteration.txt``);
see `resolve_model_path`.  Tasks are the rows of ``<data_dir>/<env>/<split>.parquet``
(``scripts/prepare_data.py`` writes it when missing), the first ``--limit`` of them
if given.  Without ``--server_url`` a WebShop server is started on a free port and
stopped at the end.

``--n k`` with k > 1 samples k rollouts per task at ``--temperature`` and reports
mean@k (``success_rate``: the mean over tasks of each task's mean success) and
pass@k (the share of tasks with at least one success).

Episodes whose env failed (server errors) are counted in ``failed`` and left out
of every mean; a task whose samples all failed is not scored.

Output: a table on stdout, ``--out`` (JSON summary; default
``results/<model>_<env>_<split>.json``) and ``<out stem>.tasks.jsonl`` beside it
(one line per rollout: ``task_id``, ``sample``, ``success``, ``env_reward``,
``turns``, ``invalid_actions``, ``failed`` ...).  Intervals: success with the
Wilson score interval when n = 1, else a percentile bootstrap over per-task mean
success; reward with a percentile bootstrap over tasks (2000 resamples, seeded);
``compare`` with a paired percentile bootstrap over tasks (10000 resamples,
seeded) and, when both files hold one rollout per task, McNemar's exact test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import numpy as np

from agentgym.spawn import serve_subprocess
from verl.trainer.checkpoint import LATEST_MARKER

REPO = Path(__file__).resolve().parents[1]
Z95 = 1.959964
REWARD_RESAMPLES = 2000
SUCCESS_RESAMPLES = 2000
COMPARE_RESAMPLES = 10000
SERVER_START_TIMEOUT_S = 180.0
SPLITS = ("train", "dev", "test")

__all__ = [
    "ModelPathError", "TaskResult", "bootstrap_ci", "compare", "compare_main", "evaluate", "load_task_results",
    "main", "mcnemar_exact", "paired_bootstrap_ci", "resolve_model_path", "summarize", "task_results_from_batch",
    "wilson_interval",
]


# ---------------------------------------------------------------------------------------------- statistics
def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``p = successes / n``.

    ``center = (p + z^2 / (2n)) / (1 + z^2 / n)``,
    ``half = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))``,
    interval ``[center - half, center + half]``; the bound is exactly 0 when ``successes = 0``
    and exactly 1 when ``successes = n`` (clipped to [0, 1] against rounding).
    ``z = 1.959964`` gives 95%.  With ``n = 0`` nothing is known: ``(0.0, 1.0)``.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo = 0.0 if successes == 0 else max(0.0, center - half)  # exactly 0 (resp. 1) at the edges
    hi = 1.0 if successes == n else min(1.0, center + half)
    return lo, hi


def _as_vector(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of numbers, got shape {arr.shape}")
    return arr


def bootstrap_ci(values: Sequence[float] | np.ndarray, stat: Callable[[np.ndarray], float] = np.mean,
                 resamples: int = REWARD_RESAMPLES, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over ``values``.

    Draw ``resamples`` samples of size ``m = len(values)`` with replacement
    (``numpy.random.default_rng(seed)``), compute ``s_r = stat(sample_r)`` for each,
    and return the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the
    ``s_r`` (linear interpolation).  Deterministic for a given seed; a constant
    vector ``c`` gives ``[c, c]``.
    """
    x = _as_vector(values, "values")
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples >= 1 and 0 < level < 1, got {resamples}, {level}")
    idx = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size))
    stats = np.array([stat(x[row]) for row in idx], dtype=float)
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_bootstrap_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                        stat: Callable[[np.ndarray], float] = np.mean, resamples: int = COMPARE_RESAMPLES,
                        seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Paired percentile bootstrap interval of ``stat(b - a)``.

    ``a[i]`` and ``b[i]`` are the same task's scores under A and B; tasks (pairs)
    are resampled together, so the interval is `bootstrap_ci` of the per-task
    differences ``d_i = b_i - a_i``.  Identical vectors give ``[0, 0]``.
    """
    x, y = _as_vector(a, "a"), _as_vector(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired vectors differ in length: {x.size} and {y.size}")
    return bootstrap_ci(y - x, stat=stat, resamples=resamples, seed=seed, level=level)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar test on the discordant pairs.

    ``b``: pairs where A fails and B succeeds; ``c``: A succeeds and B fails.
    Under H0 (no difference) ``b ~ Binomial(b + c, 1/2)``, so
    ``p = min(1, 2 * sum_{i=0}^{min(b, c)} C(b + c, i) / 2^(b + c))``
    (computed exactly with fractions).  ``b = c = 0`` gives 1.0.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    tail = Fraction(sum(math.comb(n, i) for i in range(min(b, c) + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


# ---------------------------------------------------------------------------------------------- model path
class ModelPathError(FileNotFoundError):
    """``--model`` names no Hugging Face folder, checkpoint step or checkpoints folder."""


def _is_hf_folder(path: Path) -> bool:
    return (path / "config.json").is_file()


def resolve_model_path(path: str | os.PathLike[str]) -> Path:
    """The Hugging Face folder that ``path`` stands for.

    Tried in order: ``path`` itself (holds ``config.json``); ``path/huggingface``
    (``<ckpt>/global_step_K/actor``); ``path/actor/huggingface``
    (``<ckpt>/global_step_K``); and, when ``path`` holds ``latest_checkpointed_iteration.txt``
    (the checkpoints folder), ``path/global_step_<K>/actor/huggingface``.  Raises
    `ModelPathError` listing every place looked at.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise ModelPathError(f"--model {root}: no such file or directory")
    candidates = [root, root / "huggingface", root / "actor" / "huggingface"]
    looked = [str(c / "config.json") for c in candidates]
    for candidate in candidates:
        if _is_hf_folder(candidate):
            return candidate.resolve()
    marker = root / LATEST_MARKER
    note = ""
    if marker.is_file():
        text = marker.read_text().strip()
        try:
            step = int(text)
        except ValueError:
            raise ModelPathError(f"--model {root}: {marker} should hold a step number, holds {text!r}") from None
        hf = root / f"global_step_{step}" / "actor" / "huggingface"
        if _is_hf_folder(hf):
            return hf.resolve()
        looked.append(f"{hf / 'config.json'} (step {step}, from {marker})")
        if (root / f"global_step_{step}" / "actor").is_dir():
            note = " (the checkpoint has an actor/ folder but no Hugging Face export in actor/huggingface/)"
    else:
        looked.append(f"{marker} (a checkpoints folder)")
        steps = sorted(p.name for p in root.glob("global_step_*") if p.is_dir())
        if steps:
            note = f" (found {', '.join(steps)} but no {LATEST_MARKER}: pass one of them)"
        elif (root / "actor").is_dir() or (root.name == "actor" and root.parent.name.startswith("global_step_")):
            note = " (a checkpoint step with no Hugging Face export: actor/huggingface/ is missing)"
    raise ModelPathError(f"--model {root} is not a Hugging Face folder, checkpoint step or checkpoints folder{note}; "
                         "looked for:\n  " + "\n  ".join(looked))


def _model_label(hf: Path) -> str:
    """A short name for default output files: the ``global_step_K`` of a checkpoint export, else the folder name."""
    for part in reversed(hf.parts):
        if part.startswith("global_step_"):
            return part
    return hf.name or "model"


# ---------------------------------------------------------------------------------------------- tasks
def task_file(data_dir: str | os.PathLike[str], env: str, split: str) -> Path:
    return Path(data_dir) / env / f"{split}.parquet"


def ensure_task_file(data_dir: str | os.PathLike[str], env: str, split: str) -> Path:
    """``<data_dir>/<env>/<split>.parquet``, written with ``scripts/prepare_data.py`` when missing."""
    path = task_file(data_dir, env, split)
    if path.is_file():
        return path
    script = REPO / "scripts" / "prepare_data.py"
    if not script.is_file():
        raise FileNotFoundError(f"task file {path} is missing and {script} (which writes it) is not there")
    print(f"[eval] {path} is missing; running {script.name} --env_name {env} --out {data_dir}", flush=True)
    subprocess.run([sys.executable, str(script), "--env_name", env, "--out", str(data_dir)], check=True)
    if not path.is_file():
        raise FileNotFoundError(f"{script.name} ran but did not write {path}")
    return path


# ---------------------------------------------------------------------------------------------- per-task results
@dataclass
class TaskResult:
    """One rollout of one task."""

    task_id: int
    sample: int
    success: bool
    env_reward: float
    turns: int
    invalid_actions: int
    failed: bool
    data_source: str = ""
    status: str = ""
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "sample": self.sample, "success": self.success, "env_reward": self.env_reward,
                "turns": self.turns, "invalid_actions": self.invalid_actions, "failed": self.failed,
                "data_source": self.data_source, "status": self.status, "error": self.error}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> "TaskResult":
        return cls(task_id=int(row["task_id"]), sample=int(row.get("sample", 0)), success=bool(row["success"]),
                   env_reward=float(row.get("env_reward", 0.0)), turns=int(row.get("turns", 0)),
                   invalid_actions=int(row.get("invalid_actions", 0)), failed=bool(row.get("failed", False)),
                   data_source=str(row.get("data_source", "")), status=str(row.get("status", "")),
                   error=row.get("error"))


def _invalid_actions(turns: Any) -> int:
    """Assistant turns the action template could not parse (``valid`` False)."""
    return sum(1 for t in (turns or []) if isinstance(t, Mapping) and t.get("role") == "assistant"
               and t.get("valid") is False)


def task_results_from_batch(out: Any, n: int) -> list[TaskResult]:
    """One `TaskResult` per row of a ``run_llm_loop`` output (rows of a task adjacent: sample = row % n)."""
    nt = out.non_tensor_batch
    results = []
    for i in range(len(nt["task_id"])):
        failed = bool(nt["failed"][i])
        results.append(TaskResult(
            task_id=int(nt["task_id"][i]), sample=i % n, success=bool(nt["success"][i]) and not failed,
            env_reward=float(nt["env_reward"][i]), turns=int(nt["num_turns"][i]),
            invalid_actions=_invalid_actions(nt["trajectory"][i]), failed=failed,
            data_source=str(nt["data_source"][i]), status=str(nt["status"][i]),
            error=str(nt["error"][i]) if nt["error"][i] else None,
        ))
    return results


def _per_task(results: Sequence[TaskResult]) -> dict[int, list[TaskResult]]:
    """Non-failed rollouts grouped by task id (tasks whose rollouts all failed are absent), in first-seen order."""
    grouped: dict[int, list[TaskResult]] = {}
    for r in results:
        grouped.setdefault(r.task_id, [])
        if not r.failed:
            grouped[r.task_id].append(r)
    return {task: rows for task, rows in grouped.items() if rows}


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def _ci(values: Sequence[float], resamples: int, seed: int) -> list[float] | None:
    return list(bootstrap_ci(values, resamples=resamples, seed=seed)) if values else None


def summarize(results: Sequence[TaskResult], n: int, seed: int = 0) -> dict[str, Any]:
    """The headline numbers of a set of rollouts (see the module docstring for the intervals)."""
    tasks = {r.task_id for r in results}
    scored = _per_task(results)
    ok = [r for r in results if not r.failed]
    success = [float(np.mean([r.success for r in rows])) for rows in scored.values()]
    reward = [float(np.mean([r.env_reward for r in rows])) for rows in scored.values()]
    turns = sum(r.turns for r in ok)
    out: dict[str, Any] = {
        "tasks": len(tasks), "scored_tasks": len(scored), "rollouts": len(results),
        "failed": sum(r.failed for r in results), "success_rate": _mean(success),
    }
    if n == 1:
        out["success_ci95"] = list(wilson_interval(int(sum(success)), len(success)))
    else:
        out["success_ci95"] = _ci(success, SUCCESS_RESAMPLES, seed)
    out["mean_reward"] = _mean(reward)
    out["reward_ci95"] = _ci(reward, REWARD_RESAMPLES, seed)
    out["invalid_action_rate"] = sum(r.invalid_actions for r in ok) / turns if turns else 0.0
    out["mean_turns"] = _mean([float(r.turns) for r in ok])
    if n > 1:
        out["mean_at_k"] = out["success_rate"]
        out["pass_at_k"] = _mean([float(any(r.success for r in rows)) for rows in scored.values()])
    return out


def _ci_methods(n: int, seed: int) -> dict[str, str]:
    success = ("Wilson score interval over tasks (z=1.959964)" if n == 1 else
               f"percentile bootstrap over per-task mean success ({SUCCESS_RESAMPLES} resamples, seed {seed})")
    return {"success": success,
            "reward": f"percentile bootstrap over per-task mean env reward ({REWARD_RESAMPLES} resamples, seed {seed})"}


# ---------------------------------------------------------------------------------------------- servers, worker
@contextmanager
def env_server(env: str) -> Iterator[str]:
    """An env server process (``agentgym serve <env>``) on a free port; yields its URL once healthy."""
    with serve_subprocess(env, timeout_s=SERVER_START_TIMEOUT_S) as url:
        print(f"[eval] started a {env} server at {url}", flush=True)
        yield url


def split_server_url(url: str) -> tuple[str, int]:
    """``http://host:port`` -> (``http://host``, port), as `AgentConfig` takes them (default port from the scheme)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--server_url must look like http://HOST:PORT, got {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}", port


def rollout_worker(model_path: str, args: argparse.Namespace) -> Any:
    """An in-process rollout-only `ActorRolloutRefWorker` with its engine started."""
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    worker = ActorRolloutRefWorker({
        "model": {"path": model_path},
        "num_threads": args.threads,
        "device": args.device,
        "seed": args.seed,
        "rollout": {"name": args.engine, "dtype": args.dtype, "kv_cache_gb": args.kv_cache_gb, "seed": args.seed,
                    "max_model_len": args.max_trajectory_length + 64},
    }, role="rollout")
    worker.init_model()
    return worker


# ---------------------------------------------------------------------------------------------- evaluate
def _default_out(hf: Path, env: str, split: str) -> Path:
    return Path("results") / f"{_model_label(hf)}_{env}_{split}.json"


def tasks_path_for(out: str | os.PathLike[str]) -> Path:
    """``results/NAME.json`` -> ``results/NAME.tasks.jsonl`` (the per-rollout file beside a summary)."""
    out = Path(out)
    stem = out.name[: -len(".json")] if out.name.endswith(".json") else out.name
    return out.with_name(f"{stem}.tasks.jsonl")


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Run the evaluation ``args`` describe (see `build_parser`); write the files; return the summary."""
    from openmanus_rl.envs import get_env_spec
    from verl.utils.dataset import TaskDataLoader, read_tasks

    get_env_spec(args.env_name)  # unknown env: fail before loading anything
    hf = resolve_model_path(args.model)
    print(f"[eval] model: {hf}" + ("" if Path(args.model).resolve() == hf else f" (resolved from {args.model})"),
          flush=True)
    frame = read_tasks(ensure_task_file(args.data_dir, args.env_name, args.split), max_rows=args.limit)
    if len(frame) == 0:
        raise ValueError(f"no tasks in {task_file(args.data_dir, args.env_name, args.split)}")
    batch_size = len(frame) if args.batch_size <= 0 else min(args.batch_size, len(frame))
    batches = TaskDataLoader(frame, batch_size, shuffle=False).all_batches()
    greedy = args.n == 1
    out_path = Path(args.out) if args.out else _default_out(hf, args.env_name, args.split)

    from transformers import AutoTokenizer

    from openmanus_rl.agent import OpenManusAgent

    results: list[TaskResult] = []
    start = time.perf_counter()
    with ExitStack() as stack:
        if args.server_url:
            server_url = args.server_url
        else:
            from agentgym.launcher import ENVS

            if args.env_name not in ENVS:
                raise ValueError(f"no server can be started here for env {args.env_name!r} (servable: {sorted(ENVS)}); "
                                 "start one and pass --server_url")
            server_url = stack.enter_context(env_server(args.env_name))
        base, port = split_server_url(server_url)
        tokenizer = AutoTokenizer.from_pretrained(str(hf))
        worker = rollout_worker(str(hf), args)
        stack.callback(worker.shutdown)
        config = {"env_name": args.env_name, "env_server_base": base, "env_ports": [port], "n": args.n,
                  "max_turns": args.max_turns, "max_prompt_length": args.max_prompt_length,
                  "max_response_length": args.max_response_length, "max_obs_length": args.max_obs_length,
                  "max_trajectory_length": args.max_trajectory_length, "action_format": args.action_format,
                  "temperature": args.temperature, "seed": args.seed, "write_viewer": False,
                  "request_timeout_s": args.request_timeout_s}
        agent = stack.enter_context(OpenManusAgent(tokenizer, worker, config))
        print(f"[eval] {len(frame)} {args.env_name}/{args.split} tasks x n={args.n} "
              f"({'greedy' if greedy else f'sampled at temperature {args.temperature}'}) in {len(batches)} batch(es); "
              f"server {server_url}; engine {args.engine}", flush=True)
        for index, batch in enumerate(batches):
            # seeds: trajectory_seed(seed, 0, task, copy): the same samples whatever the batch size or order
            out = agent.run_llm_loop(batch, do_sample=not greedy, global_step=0)
            results += task_results_from_batch(out, args.n)
            done = [r for r in results if not r.failed]
            print(f"[eval] batch {index + 1}/{len(batches)}: {len({r.task_id for r in results})} tasks, "
                  f"success so far {np.mean([r.success for r in done]) if done else float('nan'):.3f}, "
                  f"failed {len(results) - len(done)}, {time.perf_counter() - start:.0f}s", flush=True)

    summary = {"model": str(hf), "env": args.env_name, "split": args.split, "n": args.n, "greedy": greedy}
    summary.update(summarize(results, args.n, args.seed))
    by_source: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        by_source[r.data_source].append(r)
    summary["per_source"] = {source: summarize(rows, args.n, args.seed) for source, rows in sorted(by_source.items())}
    summary["ci_method"] = _ci_methods(args.n, args.seed)
    summary["wall_s"] = time.perf_counter() - start
    summary["tasks_per_s"] = len({r.task_id for r in results}) / summary["wall_s"]
    summary["tasks_file"] = tasks_path_for(out_path).name
    summary["config"] = {**vars(args), "model_arg": args.model, "model": str(hf), "server_url": server_url,
                         "out": str(out_path)}

    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(summary, indent=2) + "\n")
    with open(tasks_path_for(out_path), "w") as f:
        for r in results:
            f.write(json.dumps(r.to_json()) + "\n")
    print(format_summary(summary))
    print(f"[eval] wrote {out_path} and {tasks_path_for(out_path)}")
    return summary


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}"


def _fmt_ci(ci: Any) -> str:
    return "-" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def format_summary(s: Mapping[str, Any]) -> str:
    """The summary as a text table."""
    mode = "greedy" if s["greedy"] else f"n={s['n']} samples per task"
    lines = [f"model {s['model']}", f"{s['env']}/{s['split']}: {s['tasks']} tasks ({s['scored_tasks']} scored), "
             f"{s['rollouts']} rollouts, {s['failed']} failed (env errors, not scored); {mode}",
             f"{'metric':<22} {'value':>8}  95% CI"]
    rows = [("success_rate" if s["greedy"] else "success_rate (mean@k)", s["success_rate"], s["success_ci95"]),
            ("mean_reward", s["mean_reward"], s["reward_ci95"])]
    if not s["greedy"]:
        rows.append(("pass@k", s.get("pass_at_k"), None))
    rows += [("invalid_action_rate", s["invalid_action_rate"], None), ("mean_turns", s["mean_turns"], None)]
    lines += [f"{name:<22} {_fmt(value):>8}  {_fmt_ci(ci) if ci is not None else ''}".rstrip() for name, value, ci in rows]
    per_source = s.get("per_source") or {}
    if per_source:
        lines.append(f"{'source':<22} {'tasks':>6} {'success':>8}  {'95% CI':<18} {'reward':>8} {'failed':>6}")
        for source, p in per_source.items():
            lines.append(f"{source:<22} {p['tasks']:>6} {_fmt(p['success_rate']):>8}  {_fmt_ci(p['success_ci95']):<18} "
                         f"{_fmt(p['mean_reward']):>8} {p['failed']:>6}")
    methods = s.get("ci_method") or {}
    lines += [f"CI ({k}): {v}" for k, v in methods.items()]
    if "wall_s" in s:
        lines.append(f"wall {s['wall_s']:.0f} s, {s['tasks_per_s']:.3f} tasks/s")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- compare
def load_task_results(path: str | os.PathLike[str]) -> list[TaskResult]:
    """The per-rollout records of a result: a ``.tasks.jsonl`` file, or a summary ``.json`` (its JSONL beside it)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        jsonl = path
    else:
        jsonl = tasks_path_for(path)
        if path.is_file():
            try:
                named = json.loads(path.read_text()).get("tasks_file")
            except (ValueError, AttributeError):
                named = None
            if named:
                jsonl = path.with_name(named)
    if not jsonl.is_file():
        raise FileNotFoundError(f"no per-task results for {path}: {jsonl} does not exist")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    return [TaskResult.from_json(r) for r in rows]


def compare(a: str | os.PathLike[str], b: str | os.PathLike[str], seed: int = 0,
            resamples: int = COMPARE_RESAMPLES) -> dict[str, Any]:
    """Paired comparison of result B against result A over the tasks both scored.

    Per task: success = mean success over its non-failed rollouts (0/1 when greedy),
    reward = mean env reward.  Reports mean(B) - mean(A) (``gain``) with a
    `paired_bootstrap_ci`; with one rollout per task in both, also the discordant
    counts ``b`` (A fails, B succeeds), ``c`` (A succeeds, B fails) and
    `mcnemar_exact` (b, c).
    """
    ra, rb = load_task_results(a), load_task_results(b)
    ta, tb = _per_task(ra), _per_task(rb)
    ids_a, ids_b = {r.task_id for r in ra}, {r.task_id for r in rb}
    shared = [t for t in ta if t in tb]
    both_ids = ids_a & ids_b
    out: dict[str, Any] = {
        "a": str(a), "b": str(b), "shared_tasks": len(shared), "only_a": len(ids_a - ids_b), "only_b": len(ids_b - ids_a),
        "unscored_shared": len(both_ids) - len(shared),  # in both files, but all rollouts failed in at least one
        "ci_method": f"paired percentile bootstrap over tasks ({resamples} resamples, seed {seed})",
    }
    if not shared:
        out["success"] = out["reward"] = None
        return out
    for key, value in (("success", lambda r: float(r.success)), ("reward", lambda r: r.env_reward)):
        va = np.array([np.mean([value(r) for r in ta[t]]) for t in shared])
        vb = np.array([np.mean([value(r) for r in tb[t]]) for t in shared])
        out[key] = {"a_mean": float(va.mean()), "b_mean": float(vb.mean()), "gain": float((vb - va).mean()),
                    "ci95": list(paired_bootstrap_ci(va, vb, resamples=resamples, seed=seed))}
    binary = all(len(ta[t]) == 1 and len(tb[t]) == 1 for t in shared)
    out["binary"] = binary
    if binary:
        sa = [ta[t][0].success for t in shared]
        sb = [tb[t][0].success for t in shared]
        b_wins = sum(1 for x, y in zip(sa, sb) if not x and y)
        a_wins = sum(1 for x, y in zip(sa, sb) if x and not y)
        out["success"].update(b=b_wins, c=a_wins, mcnemar_p=mcnemar_exact(b_wins, a_wins))
    return out


def format_comparison(c: Mapping[str, Any]) -> str:
    lines = [f"A: {c['a']}", f"B: {c['b']}",
             f"paired over {c['shared_tasks']} shared tasks (only in A: {c['only_a']}, only in B: {c['only_b']}, "
             f"shared but unscored (failed): {c['unscored_shared']})"]
    if c["success"] is None:
        lines.append("no shared scored tasks: nothing to compare")
        return "\n".join(lines)
    lines.append(f"{'metric':<10} {'A':>8} {'B':>8} {'B - A':>8}  95% CI")
    for key in ("success", "reward"):
        m = c[key]
        lines.append(f"{key:<10} {m['a_mean']:>8.4f} {m['b_mean']:>8.4f} {m['gain']:>+8.4f}  {_fmt_ci(m['ci95'])}")
    s = c["success"]
    if c.get("binary"):
        lines.append(f"McNemar exact (two-sided): b (A fails, B succeeds) = {s['b']}, "
                     f"c (A succeeds, B fails) = {s['c']}, p = {s['mcnemar_p']:.4g}")
    else:
        lines.append("McNemar: not applicable (more than one rollout per task in a file)")
    lines.append(f"CI: {c['ci_method']}")
    return "\n".join(lines)


def compare_main(argv: Sequence[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m openmanus_rl.eval compare",
                                     description="Paired comparison of two evaluation results (B - A)")
    parser.add_argument("a", help="result A: a summary .json (with its .tasks.jsonl beside it) or a .tasks.jsonl")
    parser.add_argument("b", help="result B, likewise")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=COMPARE_RESAMPLES)
    parser.add_argument("--json", default=None, help="also write the comparison here")
    args = parser.parse_args(list(argv))
    result = compare(args.a, args.b, seed=args.seed, resamples=args.resamples)
    print(format_comparison(result))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


# ---------------------------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    """The evaluation's flags; the agent's limits, the engine and its device default to ``ppo_trainer.yaml``'s values."""
    from verl.utils.precision import DTYPE_CHOICES
    from verl.utils.yaml_defaults import add_yaml_argument

    parser = argparse.ArgumentParser(prog="python -m openmanus_rl.eval", description=__doc__.split("\n\n")[0],
                                     epilog="compare: python -m openmanus_rl.eval compare A.json B.json")
    parser.add_argument("--model", required=True,
                        help="HF folder, <ckpt>/global_step_K[/actor], or the checkpoints folder (latest step)")
    add_yaml_argument(parser, "--env_name", "agent.env_name")
    parser.add_argument("--split", default="test", choices=SPLITS)
    parser.add_argument("--data_dir", default="data")
    parser.add_argument("--limit", type=int, default=-1, help="evaluate the first N tasks (default: the whole split)")
    parser.add_argument("--n", type=int, default=1, help="rollouts per task; 1: greedy, >1: sampled (mean@k, pass@k)")
    add_yaml_argument(parser, "--temperature", "actor_rollout_ref.rollout.temperature", "sampling temperature when --n > 1",
                      type=float)
    parser.add_argument("--server_url", default=None, help="a running env server (default: start one on a free port)")
    parser.add_argument("--out", default=None, help="summary JSON (default results/<model>_<env>_<split>.json)")
    parser.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed")
    add_yaml_argument(parser, "--max_turns", "agent.max_turns", "turns per episode; unset: the env's own cap "
                      "(EnvSpec.max_turns)", type=int)
    for limit in ("max_prompt_length", "max_response_length", "max_obs_length", "max_trajectory_length"):
        add_yaml_argument(parser, f"--{limit}", f"agent.{limit}", type=int)
    add_yaml_argument(parser, "--action_format", "agent.action_format")
    add_yaml_argument(parser, "--engine", "actor_rollout_ref.rollout.name", choices=("vllm", "hf"))
    add_yaml_argument(parser, "--dtype", "actor_rollout_ref.rollout.dtype", choices=DTYPE_CHOICES)
    add_yaml_argument(parser, "--threads", "actor_rollout_ref.num_threads", "engine / torch threads", type=int)
    add_yaml_argument(parser, "--device", "actor_rollout_ref.device", "where the engine runs", choices=("cpu", "cuda"))
    parser.add_argument("--batch_size", type=int, default=64,
                        help="tasks per rollout call (all their trajectories generate together); <= 0: all at once")
    parser.add_argument("--kv_cache_gb", type=float, default=4.0,
                        help="the vLLM engine's KV cache (GiB): room for the trajectories in flight")
    add_yaml_argument(parser, "--request_timeout_s", "agent.request_timeout_s",
                      "env server request timeout (s); raise it for envs that load slowly (ALFWorld)", type=float)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``compare A B`` or an evaluation; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compare":
        compare_main(argv[1:])
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    if args.limit == 0 or args.limit < -1:
        parser.error("--limit must be a positive number of tasks (or -1: all)")
    try:
        evaluate(args)
    except ModelPathError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
