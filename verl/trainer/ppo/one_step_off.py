"""One-step-off rollout (``trainer.staleness=1``): the next step's batch is rolled out while this step trains.

Once step k's batch is rolled out and checked, the newest weights go into the idle engine and step k+1's rollout
starts on a driver thread while step k trains; the worker runs generation and training on two threads (a Ray
concurrency group). So the batch of step k+1 was drawn by the weights before update k: one update stale, and the
loss corrects for it with truncated importance sampling on the engine's log-probs (``actor.tis_cap``).
Validation and checkpoints first wait for the rollout ahead; a checkpoint holds its batch (`RolloutAhead.to_save`),
so a resumed run trains the same samples in the same order (none lost, none used twice).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Callable

from verl.protocol import DataProto


@dataclasses.dataclass
class Collected:
    """A step's scored rollout: the batch, its rollout metrics, and the policy version (actor updates so far)
    whose weights the engine sampled it with."""

    batch: DataProto
    metrics: dict[str, float]
    policy_version: int


@dataclasses.dataclass
class Ahead:
    """The next step's rollout, started while this step trains: its tasks, the dataloader state before
    they were drawn, and the job (a `Future` until its batch is taken, or a `Collected` restored from a checkpoint)."""

    tasks: DataProto
    loader_before: dict
    job: Future | Collected


class RolloutAhead:
    """At most one rollout running ahead of the step that trains, on one driver thread."""

    def __init__(self) -> None:
        self.pending: Ahead | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="rollout-ahead")

    def launch(self, tasks: DataProto, loader_before: dict, collect: Callable[[], Collected]) -> None:
        self.pending = Ahead(tasks, loader_before, self._pool.submit(collect))

    def take(self) -> Ahead | None:
        """The rollout ahead (now the step's own), if any."""
        ahead, self.pending = self.pending, None
        return ahead

    def wait(self) -> None:
        """Wait for the rollout running ahead, if any; its error, if any, stays with it for its step."""
        if self.pending is not None and isinstance(self.pending.job, Future):
            wait([self.pending.job])

    def to_save(self, loader_state: dict) -> tuple[dict, dict[str, Any] | None]:
        """What a checkpoint holds of the rollout ahead: the dataloader state to save and the ahead file's content
        (None without one). A rollout ahead that failed is not saved: its tasks are drawn again on resume."""
        self.wait()
        if self.pending is None:
            return loader_state, None
        job = self.pending.job
        if isinstance(job, Future):
            job = job.result() if job.exception() is None else None
        if job is None:
            return self.pending.loader_before, None
        saved = {"tasks": self.pending.tasks, "loader_before": self.pending.loader_before, "batch": job.batch}
        return loader_state, saved | {"metrics": job.metrics, "policy_version": job.policy_version}

    def restore(self, saved: dict[str, Any]) -> None:
        """The pipeline as a checkpoint left it: the next step trains the batch rolled out ahead."""
        collected = Collected(saved["batch"], saved["metrics"], saved["policy_version"])
        self.pending = Ahead(saved["tasks"], saved["loader_before"], collected)

    def drop(self) -> None:
        """Give up the rollout ahead (its tasks are drawn again from the saved dataloader state)."""
        self.pending = None

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
