"""A step's batch: rolled out, scored, and (with dynamic sampling) only the groups that can teach.

`BatchCollector.collect` rolls out a step's tasks through the rollout plugin (journaled for resume), scores them
(`Scorer`) and, with ``algorithm.filter_groups.enable``, keeps the informative groups (DAPO): groups in which every
advantage would be 0 are dropped and refilled from the next prompts, up to ``filter_groups.max_rounds`` extra
rollouts. The step keeps ``data.train_batch_size`` groups: the first informative ones in rollout order; when the
rounds run out, dropped groups fill the rest (``filter/shortfall_groups``). Refills draw from the training
dataloader, so its checkpointed position covers them and resume stays exact.

`BatchCollector.greedy_baselines` is ReMax's baseline: each task's greedy rollout, through the same scoring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from verl import batch_keys as K
from verl import core_algos
from verl.protocol import DataProto
from verl.trainer.ppo.config import PPOConfig
from verl.trainer.ppo.one_step_off import Collected
from verl.trainer.ppo.reward import mark_failed
from verl.trainer.ppo.scoring import Scorer
from verl.trainer.ppo.step_journal import StepJournals
from verl.utils.batch import concat_padded
from verl.utils.dataset import TaskDataLoader
from verl.utils.timing import LONG_PHASE_S, PhaseTimer


def trajectory_rows(batch: DataProto) -> list[int]:
    """The first row of each trajectory in ``batch``: every row in trajectory mode; in step-wise mode (one row per
    turn, each carrying its trajectory's outcome) the first row of each ``traj_uid``."""
    nt = batch.non_tensor_batch
    if K.TRAJ_UID not in nt:
        return list(range(len(batch)))
    first: dict[object, int] = {}
    for row, uid in enumerate(nt[K.TRAJ_UID]):
        first.setdefault(uid, row)
    return list(first.values())


def success_rate(batch: DataProto) -> float:
    """The share of ``batch``'s live trajectories that succeeded, each counted once (`trajectory_rows`), failed
    ones left out; 0.0 when none is live."""
    nt = batch.non_tensor_batch
    live = [row for row in trajectory_rows(batch) if not nt[K.FAILED][row]]
    return sum(bool(nt[K.SUCCESS][row]) for row in live) / len(live) if live else 0.0


def groups(batch: DataProto) -> list[DataProto]:
    """The batch split by ``uid`` (rows of one group, in their order), groups in order of first appearance."""
    order: dict[object, list[int]] = {}
    for row, uid in enumerate(batch.non_tensor_batch[K.UID]):
        order.setdefault(uid, []).append(row)
    return [batch[rows] for rows in order.values()]


def informative(group: DataProto, cfg: PPOConfig) -> bool:
    """Whether the estimator can give a row of ``group`` (one task's rows) a non-zero advantage: its own rule when
    it registered one (GiGPO: also when step returns at a shared state differ), else the outcome scores of the
    live rows differ."""
    alg = cfg.algorithm
    estimator = core_algos.get_estimator(alg.adv_estimator)
    if estimator.informative is not None:
        return estimator.informative(group, alg.options())
    b = group.batch
    scores = b[K.OUTCOME_SCORES][b[K.RESPONSE_MASK].sum(dim=-1) > 0]
    return scores.numel() > 1 and bool((scores != scores[0]).any())


class BatchCollector:
    """Rolls out and scores; ``rollout`` and ``val_rollout`` (one sample per task) are set once the workers run."""

    def __init__(
        self, cfg: PPOConfig, scorer: Scorer, train_loader: TaskDataLoader, journals: StepJournals, output_dir: Path
    ) -> None:
        self.cfg = cfg
        self.scorer = scorer
        self.train_loader = train_loader
        self.journals = journals
        self.output_dir = output_dir
        self.rollout: Any = None
        self.val_rollout: Any = None

    def collect(self, tasks: DataProto, step: int, engine_version: int) -> Collected:
        """Step ``step``'s batch: roll out ``tasks`` (and refills, with dynamic sampling), scored; sampled by the
        weights of policy version ``engine_version``."""
        metrics: dict[str, float] = {}
        journal = self._open_journal(step, engine_version)
        with PhaseTimer(metrics, f"[step {step}]", LONG_PHASE_S)("rollout"):
            batch = self._rollout(tasks, metrics, step, journal=journal)
            if self.cfg.algorithm.filter_groups.enable:
                batch = self._keep_informative_groups(batch, metrics, step, journal)
        return Collected(batch, metrics, engine_version)

    def _open_journal(self, step: int, version: int) -> object | None:
        """Step ``step``'s rollout journal (`verl.trainer.ppo.step_journal`), sampled by the weights of ``version``:
        None with ``trainer.journal`` off or a rollout that keeps none (no ``open_journal``)."""
        open_journal = getattr(self.rollout, "open_journal", None)
        if not self.cfg.trainer.journal or open_journal is None:
            return None
        return open_journal(self.journals.path(step), self.journals.key(step, version))

    def _rollout(
        self, tasks: DataProto, metrics: dict[str, float], step: int, round_: int = 0, journal: object | None = None
    ) -> DataProto:
        """Roll out ``tasks`` and score them; refill rounds (``round_ > 0``) get distinct uids."""
        save = self.cfg.trainer.save_trajectories and round_ == 0
        traj_dir = str(self.output_dir / "trajectories") if save else None
        kwargs = {} if journal is None else {"journal": journal}
        batch = self.rollout.run_llm_loop(tasks, output_dir=traj_dir, global_step=step, **kwargs)
        rollout_metrics = batch.meta_info.pop("metrics", {})
        if round_ == 0:
            metrics.update(rollout_metrics)
            metrics.update(self.scorer(batch))
        else:
            self.scorer(batch)
            uids = batch.non_tensor_batch[K.UID]
            uids[:] = [f"refill{round_}-{u}" for u in uids]
        return batch

    def _keep_informative_groups(
        self, batch: DataProto, metrics: dict[str, float], step: int, journal: object | None = None
    ) -> DataProto:
        """Dynamic sampling (module docstring). The ``env/*`` metrics describe the first round;
        ``filter/kept_success_rate`` is the success rate of the trajectories the update trains on."""
        target, max_rounds = self.cfg.data.train_batch_size, self.cfg.algorithm.filter_groups.max_rounds
        kept: list[DataProto] = []
        dropped: list[DataProto] = []
        seen_dropped, round_ = 0, 0
        while True:
            for group in groups(batch):
                useful = informative(group, self.cfg)
                (kept if useful else dropped).append(group)
                seen_dropped += not useful
            if len(kept) >= target or round_ >= max_rounds:
                break
            round_ += 1
            batch = self._rollout(self.train_loader.next_batch(), metrics, step, round_, journal)
        shortfall = max(target - len(kept), 0)
        batch = concat_padded(kept[:target] + dropped[:shortfall], self.rollout.pad_id)
        metrics.update(
            {
                "filter/dropped_groups": float(seen_dropped),
                "filter/refill_rounds": float(round_),
                "filter/shortfall_groups": float(shortfall),
                "filter/kept_success_rate": success_rate(batch),
            }
        )
        return batch

    def greedy_baselines(self, tasks: DataProto, batch: DataProto, step: int) -> dict[str, float]:
        """For an estimator with ``greedy_baseline`` (ReMax): put ``reward_baselines`` (B,) in ``batch``, the
        outcome score of each task's greedy rollout (through the same scoring). A task whose greedy rollout
        failed has no baseline: its sampled rows are marked failed (`mark_failed`), out of every group, loss and
        metric, and counted in ``<estimator>/failed_baseline_rows``."""
        name = self.cfg.algorithm.adv_estimator
        greedy = self.val_rollout.run_llm_loop(tasks, do_sample=False, global_step=step)
        self.scorer(greedy)
        g = greedy.non_tensor_batch
        by_task = {
            task: score
            for task, score, failed in zip(g[K.TASK_ID], greedy.batch[K.OUTCOME_SCORES].tolist(), g[K.FAILED])
            if not failed
        }
        nt = batch.non_tensor_batch
        orphans = [i for i, task in enumerate(nt[K.TASK_ID]) if task not in by_task and not nt[K.FAILED][i]]
        mark_failed(batch, orphans, f"{name}: the greedy baseline rollout of this task failed")
        batch.batch[K.REWARD_BASELINES] = torch.tensor(
            [by_task.get(t, 0.0) for t in nt[K.TASK_ID]], dtype=torch.float32
        )
        return {f"{name}/failed_baseline_rows": float(len(orphans))}
