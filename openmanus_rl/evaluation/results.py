"""Per-rollout records (`TaskResult`) and the files that hold them: a summary ``NAME.json`` and ``NAME.tasks.jsonl``."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence


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
        """Every field by name, as one line of ``NAME.tasks.jsonl`` holds it (`from_json` reads it back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> "TaskResult":
        return cls(
            task_id=int(row["task_id"]),
            sample=int(row.get("sample", 0)),
            success=bool(row["success"]),
            env_reward=float(row.get("env_reward", 0.0)),
            turns=int(row.get("turns", 0)),
            invalid_actions=int(row.get("invalid_actions", 0)),
            failed=bool(row.get("failed", False)),
            data_source=str(row.get("data_source", "")),
            status=str(row.get("status", "")),
            error=row.get("error"),
        )


def _invalid_actions(turns: Any) -> int:
    """Assistant turns the action template could not parse (``valid`` False)."""
    return sum(
        1 for t in (turns or []) if isinstance(t, Mapping) and t.get("role") == "assistant" and t.get("valid") is False
    )


def task_results_from_batch(out: Any, n: int) -> list[TaskResult]:
    """One `TaskResult` per row of a ``run_llm_loop`` output (rows of a task adjacent: sample = row % n)."""
    nt = out.non_tensor_batch
    results = []
    for i in range(len(nt["task_id"])):
        failed = bool(nt["failed"][i])
        results.append(
            TaskResult(
                task_id=int(nt["task_id"][i]),
                sample=i % n,
                success=bool(nt["success"][i]) and not failed,
                env_reward=float(nt["env_reward"][i]),
                turns=int(nt["num_turns"][i]),
                invalid_actions=_invalid_actions(nt["trajectory"][i]),
                failed=failed,
                data_source=str(nt["data_source"][i]),
                status=str(nt["status"][i]),
                error=str(nt["error"][i]) if nt["error"][i] else None,
            )
        )
    return results


def task_results_from_episodes(out: Any) -> list[TaskResult]:
    """One `TaskResult` per episode of a gateway rollout (``openmanus_rl.gateway``), in order.

    An episode's rows (its samples: more than one after a prefix break) share its ``gateway_session``; its
    turns are its model calls, ``sample`` counts the task's episodes, and ``success`` is the gateway's
    (`openmanus_rl.gateway.output`: the program's ``info["success"]`` when it gave a bool, else ``reward >= 1``).
    The gateway cannot tell an invalid action: ``invalid_actions`` is 0.
    """
    nt = out.non_tensor_batch
    first: dict[str, int] = {}
    calls: dict[str, int] = {}
    for i, session in enumerate(nt["gateway_session"]):
        first.setdefault(session, i)
        calls[session] = calls.get(session, 0) + int(nt["num_turns"][i])
    copies: dict[int, int] = {}
    results = []
    for session, i in first.items():
        task, failed, reward = int(nt["task_id"][i]), bool(nt["failed"][i]), float(nt["reward_total"][i])
        copies[task] = copies.get(task, -1) + 1
        results.append(
            TaskResult(
                task_id=task,
                sample=copies[task],
                success=bool(nt["success"][i]) and not failed,
                env_reward=reward,
                turns=calls[session],
                invalid_actions=0,
                failed=failed,
                data_source=str(nt["data_source"][i]),
                status=str(nt["status"][i]),
                error=str(nt["error"][i]) if nt["error"][i] else None,
            )
        )
    return results


def per_task(results: Sequence[TaskResult]) -> dict[int, list[TaskResult]]:
    """Non-failed rollouts grouped by task id (tasks whose rollouts all failed are absent), in first-seen order."""
    grouped: dict[int, list[TaskResult]] = {}
    for r in results:
        grouped.setdefault(r.task_id, [])
        if not r.failed:
            grouped[r.task_id].append(r)
    return {task: rows for task, rows in grouped.items() if rows}


def _beside(out: str | os.PathLike[str], suffix: str) -> Path:
    """``results/NAME.json`` -> ``results/NAME<suffix>``."""
    out = Path(out)
    stem = out.name[: -len(".json")] if out.name.endswith(".json") else out.name
    return out.with_name(f"{stem}{suffix}")


def tasks_path_for(out: str | os.PathLike[str]) -> Path:
    """``results/NAME.json`` -> ``results/NAME.tasks.jsonl`` (the per-rollout file beside a summary)."""
    return _beside(out, ".tasks.jsonl")


def journal_path_for(out: str | os.PathLike[str]) -> Path:
    """``results/NAME.json`` -> ``results/NAME.journal.jsonl``: the rollouts of an evaluation under way."""
    return _beside(out, ".journal.jsonl")


def read_summary(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The summary object of a result: ``path``'s JSON object; None for a ``.jsonl``, a missing or unreadable file."""
    path = Path(path)
    if path.suffix == ".jsonl" or not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text())
    except ValueError:
        return None
    return summary if isinstance(summary, dict) else None


def load_task_results(path: str | os.PathLike[str]) -> list[TaskResult]:
    """The per-rollout records of a result: a ``.tasks.jsonl`` file, or a summary ``.json`` (its JSONL beside it)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        jsonl = path
    else:
        named = (read_summary(path) or {}).get("tasks_file")
        jsonl = path.with_name(named) if named else tasks_path_for(path)
    if not jsonl.is_file():
        raise FileNotFoundError(f"no per-task results for {path}: {jsonl} does not exist")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    return [TaskResult.from_json(r) for r in rows]
