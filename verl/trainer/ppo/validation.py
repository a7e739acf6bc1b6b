"""Validation: the policy on the validation tasks (greedy unless ``trainer.val_do_sample``), per data source.

    val/<source>/reward/mean    mean outcome score of the live trajectories
    val/<source>/success_rate   share of them that succeeded (the env's verdict)
    val/<source>/count, failed  live and failed trajectories

Each trajectory counts once (step-wise rows, one per turn, all carry their trajectory's score); an env or reward
error says nothing about the policy, so a failed trajectory is counted, not scored. The reward is the reward
path's alone (no reward model or judge): dev success is the env's verdict.
"""

from __future__ import annotations

import time

import numpy as np

from verl import batch_keys as K
from verl.trainer.ppo.collect import trajectory_rows
from verl.trainer.ppo.reward import RewardManager
from verl.utils.dataset import TaskDataLoader


def validate(
    loader: TaskDataLoader, rollout, reward_manager: RewardManager, do_sample: bool, step: int
) -> dict[str, float]:
    """The metrics above, over every batch of ``loader``; a validation of several batches prints its progress."""
    rows: dict[str, list[tuple[float, bool]]] = {}
    failed: dict[str, int] = {}
    start = time.perf_counter()
    batches = loader.all_batches()
    for done, tasks in enumerate(batches, 1):
        out = rollout.run_llm_loop(tasks, do_sample=do_sample, global_step=step)
        reward_manager(out)
        nt = out.non_tensor_batch
        totals = out.batch[K.OUTCOME_SCORES].tolist()
        for i in trajectory_rows(out):
            source = str(nt[K.DATA_SOURCE][i])
            if bool(nt[K.FAILED][i]):
                failed[source] = failed.get(source, 0) + 1
            else:
                rows.setdefault(source, []).append((totals[i], bool(nt[K.SUCCESS][i])))
        if len(batches) > 1:
            spent = time.perf_counter() - start
            left = f" (~{spent / done * (len(batches) - done):.0f} s left)" if done < len(batches) else ""
            print(f"[val] {done}/{len(batches)} batches of tasks, {spent:.0f} s{left}", flush=True)
    metrics = {"timing_s/validation": time.perf_counter() - start}
    for source in sorted(set(rows) | set(failed)):
        values = rows.get(source, [])
        if values:
            metrics[f"val/{source}/reward/mean"] = float(np.mean([v[0] for v in values]))
            metrics[f"val/{source}/success_rate"] = float(np.mean([v[1] for v in values]))
        metrics[f"val/{source}/count"] = float(len(values))
        metrics[f"val/{source}/failed"] = float(failed.get(source, 0))
    return metrics
