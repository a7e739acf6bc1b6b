"""`RayPPOTrainer`: the driver. It reads like the algorithm; the worker groups hide the distribution.

One step (``fit``)::

    tasks      = dataloader.next_batch()
    batch      = rollout.run_llm_loop(tasks)               # e.g. multi-turn agent episodes: what happened, per row
    scores     = reward_manager(batch)                     # the one reward path: outcome and token-level scores
    scores     = reward_model.score(batch)                 # with reward_model.enable: a learned model's or
                                                           # a judge's score in R
    batch     += actor.compute_log_prob(batch)             # old log-probs
    batch     += ref.compute_ref_log_prob(batch)           # when a KL term is on
    batch     += critic.compute_values(batch)              # GAE only
    rewards    = scores - beta * KL                        # in-reward KL, else rewards = scores
    advantages = estimator(rewards, values, mask, groups)  # core_algos registry
    critic.update_critic(batch); actor.update_actor(batch) # the actor update ends with the weight sync

plus validation every ``test_freq`` steps and an atomic checkpoint every ``save_freq`` steps; with
``trainer.keep_best`` also a checkpoint at each validation that beats every earlier one, kept and
named in ``checkpoints/best_dev.json`` (so a run's test evaluation can take the dev-chosen policy).

One-step-off (``trainer.staleness=1``): once step k's batch is rolled out and checked, the
newest weights go into the idle engine and step k+1's rollout starts on a driver thread while
step k trains; the worker runs generation and training on two threads (a Ray concurrency
group). So the batch of step k+1 was drawn by the weights before update k: one update stale,
and the loss corrects for it with truncated importance sampling on the engine's log-probs
(``actor.tis_cap``). Validation and checkpoints first wait for the rollout ahead; a checkpoint
holds its batch, so a resumed run trains the same samples in the same order (none lost, none
used twice).

Faults (what a step does when the world breaks):
* more than ``trainer.max_failed_fraction`` of a step's trajectories failed (env or reward errors):
  the step is rolled out again once, same tasks and seeds; if it fails again the run stops;
* the rollout's services (e.g. supervised env servers) cannot serve again: the run stops;
* a worker died: the run stops.
A stop is `RunStopped`, raised after the last completed step is checkpointed (when the workers
are alive to save it), with a message that names the cause and the checkpoint to resume from.
Nothing is skipped without a word.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np
import torch

from verl import core_algos
from verl.protocol import DataProto
from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup, WorkerError
from verl.trainer.checkpoint import BEST_FILE, LATEST_MARKER
from verl.trainer.ppo.config import PPOConfig
from verl.trainer.ppo.judge import Judge, JudgeUnavailable, judge_failure_problem
from verl.trainer.ppo.metrics import compute_data_metrics, compute_throughput_metrics
from verl.trainer.ppo.model_reward import apply_model_reward
from verl.trainer.ppo.reward import RewardManager, mark_failed
from verl.trainer.ppo.rollout import RolloutServices, load_rollout_plugin
from verl.trainer.ppo.step_journal import StepJournals, sampling_fingerprint
from verl.utils.batch import concat_padded
from verl.utils.dataset import TaskDataLoader, read_tasks
from verl.utils.jsonl import write_text_atomically
from verl.utils.memory import current_rss_gb
from verl.utils.timing import PhaseTimer
from verl.utils.tracking import Tracking, progress_bar
from verl.workers.fsdp_workers import ROLLOUT_GROUP, ActorRolloutRefWorker, CriticWorker
from verl.workers.reward_model import RewardModelWorker

AHEAD_FILE = "rollout_ahead.pt"  # in a checkpoint: the next step's batch, rolled out ahead (trainer.staleness=1)


MODEL_INPUTS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "responses",
    "response_mask",
)  # what every model pass reads
SAMPLING_META = ("temperature", "top_p", "top_k")  # the distribution log-probs are recomputed under
SERVICES_WAIT_S = 600.0  # how long a step waits for the rollout's services (e.g. a restarting env server)


class RunStopped(RuntimeError):
    """The run cannot go on; the message names the cause and the checkpoint to resume from."""


class TooManyFailures(RuntimeError):
    """A step's rollout failed for more than ``trainer.max_failed_fraction`` of its trajectories."""


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


class RayPPOTrainer:
    def __init__(self, config: PPOConfig, tokenizer, services: RolloutServices | None = None):
        self.config = config
        self.response_budget = config.response_budget  # the rollout plugin's, asked once
        self.tokenizer = tokenizer
        self.services = services
        alg = config.algorithm
        self.reward_manager = RewardManager(
            tokenizer, alg.reward_score_fn, alg.reward_allocation, alg.gamma, alg.reward_timeout_s
        )
        self.global_step = 0
        self.rm_wg = None  # the reward-model group, with reward_model.enable (init_workers)
        self.judge = None  # the LLM judge, with reward_model.kind=judge (init_workers)
        kl = config.algorithm.kl_ctrl
        self.kl_ctrl = (
            core_algos.AdaptiveKLController(kl.kl_coef, kl.target_kl, kl.horizon)
            if kl.type == "adaptive"
            else core_algos.FixedKLController(kl.kl_coef)
        )
        d = config.data
        self.train_loader = TaskDataLoader(
            read_tasks(d.train_files), d.train_batch_size, shuffle=d.shuffle, seed=d.seed
        )
        val_tasks = read_tasks(d.val_files, d.val_max_samples)
        self.val_loader = TaskDataLoader(val_tasks, min(d.val_batch_size, len(val_tasks)), shuffle=False)
        self.output_dir = Path(config.trainer.output_dir)
        self.ckpt_dir = Path(config.trainer.default_local_dir)
        self.overlap = config.trainer.staleness > 0
        self.journals = StepJournals(
            self.ckpt_dir, sampling_fingerprint(config.agent, config.actor_rollout_ref.rollout)
        )
        self._policy_version = 0  # actor updates so far
        self._engine_version = 0  # the policy version whose weights the rollout engine holds
        self._ahead: Ahead | None = None
        self._ahead_pool = ThreadPoolExecutor(1, thread_name_prefix="rollout-ahead") if self.overlap else None

    # ------------------------------------------------------------------ workers
    def init_workers(self) -> None:
        """Resource pool and worker groups; the critic only for estimators that need one, the ref only with a KL term,
        the reward model only with ``reward_model.enable``."""
        cfg, t = self.config, self.config.trainer
        groups = 1 + int(cfg.use_critic) + int(cfg.reward_model.uses_model)
        self.pool = RayResourcePool(
            [t.n_workers_per_node] * t.nnodes,
            use_gpu=t.device == "cuda",
            cpus_per_worker=t.cpus_per_worker,
            max_colocate_count=groups,
            name_prefix="actor_rollout_ref",
            node_labels=t.policy_nodes,
        )
        role = "actor_rollout_ref" if cfg.use_ref else "actor_rollout"
        self.actor_rollout_wg = RayWorkerGroup(
            self.pool,
            RayClassWithInitArgs(ActorRolloutRefWorker, config=cfg.actor_rollout_ref, role=role),
            concurrency_groups={ROLLOUT_GROUP: 1} if self.overlap else None,
        )
        # each group loads its model while the next group's processes start and import (not waited for in turn)
        loading = [self.actor_rollout_wg.start("init_model")]
        self.critic_wg = None
        if cfg.use_critic:
            self.critic_wg = RayWorkerGroup(self.pool, RayClassWithInitArgs(CriticWorker, config=cfg.critic))
            loading.append(self.critic_wg.start("init_model"))
        if cfg.reward_model.uses_judge:
            self.judge = Judge(cfg.reward_model.judge, t.device, self.tokenizer)
        elif cfg.reward_model.uses_model:
            self.rm_wg = RayWorkerGroup(self.pool, RayClassWithInitArgs(RewardModelWorker, config=cfg.reward_model))
            loading.append(self.rm_wg.start("init_model"))
        for future in loading:
            future.get()
        groups = [g for g in (self.actor_rollout_wg, self.critic_wg, self.rm_wg) if g is not None]
        print("[trainer] workers: " + "; ".join(f"{g.cls_name} pids {g.pids()}" for g in groups), flush=True)
        print(
            "[trainer] placement: "
            + "; ".join(f"{g.cls_name} ranks on nodes {[node[:8] for node in g.node_ids()]}" for g in groups),
            flush=True,
        )
        self.rollout, self.val_rollout = self._build_rollouts()

    def _build_rollouts(self):
        """The training rollout (``n`` samples per task) and the validation one (one each), from the
        plugin ``data.rollout`` names (`verl.trainer.ppo.rollout`)."""
        cfg = self.config
        plugin = load_rollout_plugin(cfg.data.rollout)
        n = int(cfg.agent.get("n", 1))
        return (
            plugin.build(cfg, self.tokenizer, self.actor_rollout_wg, n),
            plugin.build(cfg, self.tokenizer, self.actor_rollout_wg, 1),
        )

    def shutdown(self) -> None:
        if self._ahead_pool is not None:
            self._ahead_pool.shutdown(wait=False, cancel_futures=True)
        for wg in (
            getattr(self, "actor_rollout_wg", None),
            getattr(self, "critic_wg", None),
            getattr(self, "rm_wg", None),
        ):
            if wg is not None:
                wg.shutdown()
        if self.judge is not None:
            self.judge.close()
        for rollout in (getattr(self, "rollout", None), getattr(self, "val_rollout", None)):
            if rollout is not None and hasattr(rollout, "close"):
                rollout.close()
        if getattr(self, "pool", None) is not None:
            self.pool.release()

    # ------------------------------------------------------------------ advantages
    def compute_advantage(self, batch: DataProto) -> dict[str, float]:
        """Fill ``advantages`` and ``returns`` with the configured estimator; returns its ``adv/*`` metrics.

        Each row's outcome score is its reward R plus the in-reward KL penalty
        summed over its tokens. Failed trajectories (masked out of the loss)
        get a group of their own, so they do not shift their task's baseline.
        The estimator gets the fields of its own options (``algorithm.<name>``,
        e.g. ``algorithm.gigpo``) when it registered any, and no other's.
        """
        alg = self.config.algorithm
        own = alg.options()
        index = np.array(batch.non_tensor_batch["uid"], dtype=object)
        failed = np.array(batch.non_tensor_batch.get("failed", [False] * len(batch)), dtype=bool)
        index = np.array([f"failed-{i}" if failed[i] else index[i] for i in range(len(index))], dtype=object)
        b = batch.batch
        scores = b["outcome_scores"] + (b["token_level_rewards"] - b["token_level_scores"]).sum(dim=-1)
        metrics: dict[str, float] = {}
        fn = core_algos.get_estimator(alg.adv_estimator).fn
        advantages, returns = fn(
            token_level_rewards=b["token_level_rewards"],
            response_mask=b["response_mask"].float(),
            index=index,
            scores=scores,
            values=b.get("values"),
            reward_baselines=b.get("reward_baselines"),
            gamma=alg.gamma,
            lam=alg.lam,
            norm_adv_by_std_in_grpo=alg.norm_adv_by_std_in_grpo,
            non_tensor_batch=batch.non_tensor_batch,
            metrics=metrics,
            **(dataclasses.asdict(own) if dataclasses.is_dataclass(own) else {}),
        )
        b["advantages"], b["returns"] = advantages, returns
        return metrics

    def _greedy_baselines(self, tasks: DataProto, batch: DataProto) -> dict[str, float]:
        """For an estimator with ``greedy_baseline`` (ReMax): put ``reward_baselines`` (B,) in ``batch``, the
        outcome score of each task's greedy rollout (through the same reward path). A task whose greedy rollout
        failed has no baseline: its sampled rows are marked failed (`mark_failed`), out of every group, loss and
        metric, and counted in ``<estimator>/failed_baseline_rows``."""
        name = self.config.algorithm.adv_estimator
        greedy = self.val_rollout.run_llm_loop(tasks, do_sample=False, global_step=self.global_step)
        self._score(greedy)
        g = greedy.non_tensor_batch
        by_task = {
            task: score
            for task, score, failed in zip(g["task_id"], greedy.batch["outcome_scores"].tolist(), g["failed"])
            if not failed
        }
        nt = batch.non_tensor_batch
        orphans = [i for i, task in enumerate(nt["task_id"]) if task not in by_task and not nt["failed"][i]]
        mark_failed(batch, orphans, f"{name}: the greedy baseline rollout of this task failed")
        batch.batch["reward_baselines"] = torch.tensor(
            [by_task.get(t, 0.0) for t in nt["task_id"]], dtype=torch.float32
        )
        return {f"{name}/failed_baseline_rows": float(len(orphans))}

    def _balance(self, batch: DataProto) -> None:
        """Reorder rows so every rank gets a similar number of tokens (snake order over sorted lengths)."""
        ws = self.config.world_size
        if ws == 1:
            return
        lengths = batch.batch["attention_mask"].sum(-1).numpy()
        order = np.argsort(-lengths, kind="stable")
        buckets: list[list[int]] = [[] for _ in range(ws)]
        for k, row in enumerate(order):
            lap, pos = divmod(k, ws)
            buckets[pos if lap % 2 == 0 else ws - 1 - pos].append(int(row))
        batch.reorder(torch.tensor([row for bucket in buckets for row in bucket]))

    # ------------------------------------------------------------------ rollout
    def _collect(self, tasks: DataProto, step: int) -> Collected:
        """Step ``step``'s batch: roll out ``tasks`` (and refills, with dynamic sampling), scored."""
        metrics: dict[str, float] = {}
        version = self._engine_version
        journal = self._open_journal(step, version)
        with PhaseTimer(metrics)("rollout"):
            batch = self._rollout(tasks, metrics, step, journal=journal)
            if self.config.algorithm.filter_groups.enable:
                batch = self._keep_informative_groups(batch, metrics, step, journal)
        return Collected(batch, metrics, version)

    def _open_journal(self, step: int, version: int) -> object | None:
        """Step ``step``'s rollout journal (`verl.trainer.ppo.step_journal`), sampled by the weights of ``version``:
        None with ``trainer.journal`` off or a rollout that keeps none (no ``open_journal``)."""
        open_journal = getattr(self.rollout, "open_journal", None)
        if not self.config.trainer.journal or open_journal is None:
            return None
        return open_journal(self.journals.path(step), self.journals.key(step, version))

    def _rollout(
        self, tasks: DataProto, metrics: dict[str, float], step: int, round_: int = 0, journal: object | None = None
    ) -> DataProto:
        """Roll out ``tasks`` and score them through the reward path;
        refill rounds (``round_ > 0``) get distinct uids."""
        traj_dir = (
            str(self.output_dir / "trajectories") if self.config.trainer.save_trajectories and round_ == 0 else None
        )
        kwargs = {} if journal is None else {"journal": journal}
        batch = self.rollout.run_llm_loop(tasks, output_dir=traj_dir, global_step=step, **kwargs)
        rollout_metrics = batch.meta_info.pop("metrics", {})
        if round_ == 0:
            metrics.update(rollout_metrics)
            metrics.update(self._score(batch))
        else:
            self._score(batch)
            uids = batch.non_tensor_batch["uid"]
            uids[:] = [f"refill{round_}-{u}" for u in uids]
        return batch

    def _score(self, batch: DataProto) -> dict[str, float]:
        """The training reward of ``batch``: the reward path's, then, with ``reward_model.enable``, the learned
        model's or the judge's score in it (`verl.trainer.ppo.model_reward`); a judge failing on more than
        ``judge.max_failed_fraction`` of the episodes fails the step (`TooManyFailures`: rolled out once more,
        then the run stops). Validation keeps the reward path's alone: dev success is the env's verdict."""
        metrics = self.reward_manager(batch)
        start = time.perf_counter()
        if self.rm_wg is not None:
            out = self.rm_wg.compute_rm_score(self._for_worker(batch))
            metrics.update(
                apply_model_reward(batch, out.batch["rm_scores"], self.config.reward_model, self.reward_manager)
            )
        elif self.judge is not None:
            try:
                grid, errors, calls = self.judge.score(batch)
            except JudgeUnavailable as exc:
                raise TooManyFailures(str(exc)) from None
            metrics.update(calls)
            metrics.update(apply_model_reward(batch, grid, self.config.reward_model, self.reward_manager, errors))
            problem = judge_failure_problem(
                errors, int(calls["reward_model/judged"]), self.config.reward_model.judge.max_failed_fraction
            )
            if problem:
                raise TooManyFailures(problem)
        else:
            return metrics
        metrics["timing_s/reward_model"] = time.perf_counter() - start
        return metrics

    def _informative(self, group: DataProto) -> bool:
        """Whether the estimator can give a row of ``group`` (one task's rows) a non-zero advantage: its own
        rule when it registered one (GiGPO: also when step returns at a shared state differ), else the outcome
        scores of the live rows differ."""
        alg = self.config.algorithm
        estimator = core_algos.get_estimator(alg.adv_estimator)
        if estimator.informative is not None:
            return estimator.informative(group, alg.options())
        b = group.batch
        scores = b["outcome_scores"][b["response_mask"].sum(dim=-1) > 0]
        return scores.numel() > 1 and bool((scores != scores[0]).any())

    def _keep_informative_groups(
        self, batch: DataProto, metrics: dict[str, float], step: int, journal: object | None = None
    ) -> DataProto:
        """Dynamic sampling (DAPO): drop the groups in which every advantage would be 0 (`_informative`)
        and refill from the next prompts, up to ``filter_groups.max_rounds`` extra rollouts.

        The step keeps ``data.train_batch_size`` groups: the first informative ones in rollout order;
        when the rounds run out, dropped groups fill the rest (``filter/shortfall_groups``). Refills
        draw from the training dataloader, so its checkpointed position covers them and resume stays exact.
        The ``env/*`` metrics describe the first round; ``filter/kept_success_rate`` is the success rate of
        the trajectories the update trains on (`_success_rate`).
        """
        target, max_rounds = self.config.data.train_batch_size, self.config.algorithm.filter_groups.max_rounds
        kept: list[DataProto] = []
        dropped: list[DataProto] = []
        seen_dropped, round_ = 0, 0
        while True:
            for group in _groups(batch):
                informative = self._informative(group)
                (kept if informative else dropped).append(group)
                seen_dropped += not informative
            if len(kept) >= target or round_ >= max_rounds:
                break
            round_ += 1
            batch = self._rollout(self.train_loader.next_batch(), metrics, step, round_, journal)
        shortfall = max(target - len(kept), 0)
        chosen = kept[:target] + dropped[:shortfall]
        metrics.update(
            {
                "filter/dropped_groups": float(seen_dropped),
                "filter/refill_rounds": float(round_),
                "filter/shortfall_groups": float(shortfall),
            }
        )
        batch = concat_padded(chosen, self.rollout.pad_id)
        metrics["filter/kept_success_rate"] = _success_rate(batch)
        return batch

    def _check_failures(self, batch: DataProto) -> None:
        """`TooManyFailures` when the failed share of the batch's trajectories is above
        ``trainer.max_failed_fraction``."""
        nt = batch.non_tensor_batch
        failed = np.array(nt.get("failed", [False] * len(batch)), dtype=bool)
        share = float(failed.mean()) if len(failed) else 0.0
        if share <= self.config.trainer.max_failed_fraction:
            return
        errors = [str(e) for e in np.asarray(nt.get("error", [""] * len(batch)), dtype=object)[failed] if str(e)]
        common = max(set(errors), key=errors.count) if errors else "no error recorded"
        raise TooManyFailures(
            f"{int(failed.sum())} of {len(failed)} trajectories failed (trainer.max_failed_fraction="
            f"{self.config.trainer.max_failed_fraction}); most common error: {common[:500]}"
        )

    def _pad_to_mini_batches(self, batch: DataProto) -> DataProto:
        """Step-wise rows (one per turn) vary in number: pad to a multiple of the mini-batch sizes and ranks
        with copies of row 0 that have no model token and are marked failed, so they count in no group,
        loss or metric. A no-op in trajectory mode, whose row count the config already checked."""
        cfg = self.config
        sizes = [cfg.actor_rollout_ref.actor.ppo_mini_batch_size, cfg.world_size]
        if cfg.use_critic:
            sizes.append(cfg.critic.ppo_mini_batch_size)
        pad = (-len(batch)) % math.lcm(*sizes)
        if pad == 0:
            return batch
        filler = batch[[0] * pad]
        filler.batch["response_mask"] = torch.zeros_like(filler.batch["response_mask"])
        nt = filler.non_tensor_batch
        nt["failed"][:] = True
        nt["uid"][:] = [f"padding-{i}" for i in range(pad)]
        if "status" in nt:
            nt["status"][:] = "padding"
        return DataProto.concat([batch, filler])

    # ------------------------------------------------------------------ one step
    @staticmethod
    def _for_worker(batch: DataProto, *extra: str) -> DataProto:
        """What a worker call reads, and nothing else: the model inputs, ``extra`` tensors and the sampling settings."""
        meta = [k for k in SAMPLING_META if k in batch.meta_info]
        return batch.select(batch_keys=[*MODEL_INPUTS, *extra], non_tensor_batch_keys=[], meta_info_keys=meta)

    def _old_log_probs_from_update(self, batch: DataProto) -> bool:
        """Whether the update itself supplies the old log-probs (`PPOActor.update_policy`): the batch makes
        one optimiser step and nothing needs them before it (an in-reward KL penalty would)."""
        a = self.config.actor_rollout_ref.actor
        return (
            a.reuse_on_policy_log_prob
            and a.ppo_epochs == 1
            and len(batch) == a.ppo_mini_batch_size
            and not self.config.algorithm.use_kl_in_reward
        )

    def _values_forward_reusable(self, batch: DataProto) -> bool:
        """Whether the critic's update may backpropagate through the values pass (`PPOCritic.compute_values`,
        which declines where its memory would not allow it): the batch makes one optimiser step of the critic."""
        c = self.config.critic
        return c.reuse_values_forward and c.ppo_epochs == 1 and len(batch) == c.ppo_mini_batch_size

    def _actor_update_keys(self, batch: DataProto) -> list[str]:
        actor = self.config.actor_rollout_ref.actor
        reused = "old_log_probs" not in batch.batch  # the update reports the engine-vs-trainer gap itself
        keys = ["advantages", *([] if reused else ["old_log_probs"])]
        if actor.use_kl_loss:
            keys.append("ref_log_prob")
        if actor.tis_cap is not None or (reused and "rollout_log_probs" in batch.batch):
            keys.append("rollout_log_probs")
        return keys

    def train_step(self, tasks: DataProto, ready: Future | Collected | None = None) -> dict[str, float]:
        """One step on ``tasks``; ``ready``: their rollout, started ahead (one-step-off), else it runs here."""
        cfg = self.config
        metrics: dict[str, float] = {}
        timer = PhaseTimer(metrics)  # writes timing_s/<phase>
        step_start = time.perf_counter()
        if isinstance(ready, Future):
            with timer("rollout_wait"):
                ready = ready.result()
        if ready is None:
            self._sync_engine(metrics)
            ready = self._collect(tasks, self.global_step)
        metrics.update(ready.metrics)
        batch = ready.batch
        if core_algos.get_estimator(cfg.algorithm.adv_estimator).greedy_baseline:  # before the failure check:
            metrics.update(self._greedy_baselines(tasks, batch))  # a task without a baseline fails its rows
        self._check_failures(batch)
        metrics["rollout/staleness"] = float(self._policy_version - ready.policy_version)
        if self.overlap:
            self._launch_ahead(metrics)
        batch = self._pad_to_mini_batches(batch)
        r = cfg.actor_rollout_ref.rollout
        batch.meta_info.update(
            temperature=r.temperature, top_p=r.top_p, top_k=r.top_k
        )  # recompute under the sampling distribution
        if cfg.trainer.balance_batch:
            self._balance(batch)

        if not self._old_log_probs_from_update(batch):
            with timer("old_log_prob"):
                old = self.actor_rollout_wg.compute_log_prob(self._for_worker(batch))
            entropys = old.pop(batch_keys=["entropys"]).batch["entropys"]
            metrics["actor/entropy_rollout"] = float(
                core_algos.masked_mean(entropys, batch.batch["response_mask"].float())
            )
            batch.union(old)
        if cfg.use_ref:
            with timer("ref"):
                batch.union(self.actor_rollout_wg.compute_ref_log_prob(self._for_worker(batch)))
        if self.critic_wg is not None:
            with timer("values"):
                data = self._for_worker(batch)
                data.meta_info["keep_graph"] = self._values_forward_reusable(batch)
                batch.union(self.critic_wg.compute_values(data))

        if cfg.algorithm.use_kl_in_reward:
            batch, kl_metrics = core_algos.apply_kl_penalty(batch, self.kl_ctrl, cfg.algorithm.kl_penalty)
            metrics.update(kl_metrics)
        else:
            batch.batch["token_level_rewards"] = batch.batch["token_level_scores"].clone()
        with timer("adv"):
            metrics.update(self.compute_advantage(batch))

        if self.critic_wg is not None:
            with timer("update_critic"):
                metrics.update(
                    self.critic_wg.update_critic(self._for_worker(batch, "values", "returns")).meta_info["metrics"]
                )
        if self.global_step > cfg.algorithm.critic_warmup:
            with timer("update_actor_total"):
                data = self._for_worker(batch, *self._actor_update_keys(batch))
                data.meta_info["sync_weights"] = not self.overlap  # one-step-off: the engine is busy; synced when idle
                metrics.update(self.actor_rollout_wg.update_actor(data).meta_info["metrics"])
            self._policy_version += 1
            if not self.overlap:
                self._engine_version = self._policy_version
        metrics.update(
            compute_data_metrics(batch, use_critic=self.critic_wg is not None, response_budget=self.response_budget)
        )
        metrics["timing_s/step"] = time.perf_counter() - step_start
        metrics.update(compute_throughput_metrics(batch, metrics["timing_s/step"], cfg.world_size))
        return metrics

    # ------------------------------------------------------------------ one-step-off
    def _sync_engine(self, metrics: dict[str, float]) -> None:
        """Push the newest weights into the rollout engine if it holds older ones (only one-step-off lets it lag)."""
        if self._engine_version != self._policy_version:
            metrics["timing_s/weight_sync"] = self.actor_rollout_wg.sync_rollout_weights()[0]
            self._engine_version = self._policy_version

    def _launch_ahead(self, metrics: dict[str, float]) -> None:
        """Start the next step's rollout on the driver's rollout thread, with the newest weights in the
        (idle) engine; it then runs while this step trains. Nothing starts after the last step."""
        step = self.global_step + 1
        if step > self.config.trainer.total_training_steps:
            return
        self._sync_engine(metrics)
        before = self.train_loader.state_dict()
        tasks = self.train_loader.next_batch()
        self._ahead = Ahead(tasks, before, self._ahead_pool.submit(self._collect, tasks, step))

    def _wait_ahead(self) -> None:
        """Wait for the rollout running ahead, if any; its error, if any, stays with it for its step."""
        if self._ahead is not None and isinstance(self._ahead.job, Future):
            wait([self._ahead.job])

    def _settle(self) -> None:
        """An idle engine with the newest weights (for validation)."""
        self._wait_ahead()
        self._sync_engine({})

    # ------------------------------------------------------------------ validation
    def _validate(self) -> dict[str, float]:
        """Rollouts on the validation tasks (greedy unless ``val_do_sample``); per-data-source metrics, each
        trajectory counted once (step-wise rows, one per turn, all carry their trajectory's score)."""
        rows: dict[str, list[tuple[float, bool]]] = {}
        failed: dict[str, int] = {}
        start = time.perf_counter()
        batches = self.val_loader.all_batches()
        for done, tasks in enumerate(batches, 1):
            out = self.val_rollout.run_llm_loop(
                tasks, do_sample=self.config.trainer.val_do_sample, global_step=self.global_step
            )
            self.reward_manager(out)
            nt = out.non_tensor_batch
            totals = out.batch["outcome_scores"].tolist()
            for i in _trajectory_rows(out):
                source = str(nt["data_source"][i])
                # an env or reward error says nothing about the policy: count it, do not score it
                if bool(nt["failed"][i]):
                    failed[source] = failed.get(source, 0) + 1
                else:
                    rows.setdefault(source, []).append((totals[i], bool(nt["success"][i])))
            if len(batches) > 1:  # a long validation says where it is
                spent = time.perf_counter() - start
                print(
                    f"[val] {done}/{len(batches)} batches of tasks, {spent:.0f} s"
                    + (f" (~{spent / done * (len(batches) - done):.0f} s left)" if done < len(batches) else ""),
                    flush=True,
                )
        metrics = {"timing_s/validation": time.perf_counter() - start}
        for source in sorted(set(rows) | set(failed)):
            values = rows.get(source, [])
            if values:
                metrics[f"val/{source}/reward/mean"] = float(np.mean([v[0] for v in values]))
                metrics[f"val/{source}/success_rate"] = float(np.mean([v[1] for v in values]))
            metrics[f"val/{source}/count"] = float(len(values))
            metrics[f"val/{source}/failed"] = float(failed.get(source, 0))
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self) -> Path:
        """Write ``global_step_<k>`` under a temporary name, rename it into place, then update the latest marker."""
        final = self.ckpt_dir / f"global_step_{self.global_step}"
        tmp = self.ckpt_dir / f".tmp_global_step_{self.global_step}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self._wait_ahead()
        loader_state = self.train_loader.state_dict()
        if self._ahead is not None:
            ahead = self._ahead.job
            if isinstance(ahead, Future):
                ahead = ahead.result() if ahead.exception() is None else None
            if ahead is None:  # the rollout ahead failed: a resumed run draws its tasks again
                loader_state = self._ahead.loader_before
            else:
                torch.save(
                    {
                        "tasks": self._ahead.tasks,
                        "loader_before": self._ahead.loader_before,
                        "batch": ahead.batch,
                        "metrics": ahead.metrics,
                        "policy_version": ahead.policy_version,
                    },
                    tmp / AHEAD_FILE,
                )
        self.actor_rollout_wg.save_checkpoint(str(tmp / "actor"))
        if self.critic_wg is not None:
            self.critic_wg.save_checkpoint(str(tmp / "critic"))
        torch.save(
            {
                "global_step": self.global_step,
                "policy_version": self._policy_version,
                "dataloader": loader_state,
                "kl_coef": self.kl_ctrl.value,
                "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
            },
            tmp / "trainer_state.pt",
        )
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        write_text_atomically(self.ckpt_dir / LATEST_MARKER, str(self.global_step))
        self.journals.saved(self._policy_version, final, self.global_step)
        kept = sorted(self.ckpt_dir.glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
        best = self._best_step()
        for old in kept[: max(len(kept) - self.config.trainer.max_ckpt_to_keep, 0)]:
            if old.name != f"global_step_{best}":
                shutil.rmtree(old, ignore_errors=True)
        return final

    def _best_step(self) -> int | None:
        path = self.ckpt_dir / BEST_FILE
        return json.loads(path.read_text())["step"] if path.is_file() else None

    @staticmethod
    def _dev_success(metrics: dict[str, float]) -> float | None:
        """A validation's success: the mean of its ``val/<source>/success_rate`` (None when it has none)."""
        rates = [v for k, v in metrics.items() if k.startswith("val/") and k.endswith("/success_rate")]
        return float(np.mean(rates)) if rates else None

    def _is_new_best(self, metrics: dict[str, float]) -> bool:
        """Whether this validation's `_dev_success` beats every earlier one of the run; with ``trainer.keep_best``
        only."""
        success = self._dev_success(metrics)
        if not self.config.trainer.keep_best or success is None:
            return False
        best = self.ckpt_dir / BEST_FILE
        return not best.is_file() or success > json.loads(best.read_text())["dev_success"]

    def _mark_best(self, metrics: dict[str, float]) -> None:
        """Write `BEST_FILE` naming this step's checkpoint (the starting model at step 0), atomically."""
        model = (
            self.ckpt_dir / f"global_step_{self.global_step}"
            if self.global_step
            else Path(self.config.actor_rollout_ref.model.path)
        )
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        best = {"step": self.global_step, "dev_success": self._dev_success(metrics), "model": str(model.resolve())}
        write_text_atomically(self.ckpt_dir / BEST_FILE, json.dumps(best) + "\n")
        metrics["val/best_step"] = float(self.global_step)

    def _find_resume_path(self) -> Path | None:
        t = self.config.trainer
        if t.resume_mode == "disable":
            return None
        if t.resume_mode == "resume_path":
            path = Path(t.resume_from_path)
            if not (path / "trainer_state.pt").is_file():
                raise FileNotFoundError(f"trainer.resume_from_path={path} is not a checkpoint (no trainer_state.pt)")
            return path
        marker = self.ckpt_dir / LATEST_MARKER
        if not marker.is_file():
            return None
        path = self.ckpt_dir / f"global_step_{int(marker.read_text().strip())}"
        if not path.is_dir():
            raise FileNotFoundError(f"{marker} names {path}, which does not exist")
        return path

    def _load_checkpoint(self) -> None:
        path = self._find_resume_path()
        if path is None:
            return
        state = torch.load(path / "trainer_state.pt", weights_only=False)
        self.actor_rollout_wg.load_checkpoint(str(path / "actor"))
        if self.critic_wg is not None:
            self.critic_wg.load_checkpoint(str(path / "critic"))
        self.global_step = state["global_step"]
        self._policy_version = self._engine_version = state.get(
            "policy_version", self.global_step
        )  # loading synced the engine
        self.train_loader.load_state_dict(state["dataloader"])
        self.journals.loaded(self._policy_version, path)
        if (path / AHEAD_FILE).is_file():
            ahead = torch.load(path / AHEAD_FILE, weights_only=False)
            if self.overlap:  # the pipeline as it was: the next step trains the batch rolled out ahead
                self._ahead = Ahead(
                    ahead["tasks"],
                    ahead["loader_before"],
                    Collected(ahead["batch"], ahead["metrics"], ahead["policy_version"]),
                )
            else:  # synchronous now: those tasks are rolled out again with the newest weights
                self.train_loader.load_state_dict(ahead["loader_before"])
        self.kl_ctrl.value = state["kl_coef"]
        random.setstate(state["rng"]["python"])
        np.random.set_state(state["rng"]["numpy"])
        torch.set_rng_state(state["rng"]["torch"])
        print(f"[trainer] resumed from {path} at step {self.global_step}", flush=True)

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict[str, float]:
        """Train for ``trainer.total_training_steps`` steps;
        returns the last step's metrics (`RunStopped` on a fault)."""
        t = self.config.trainer
        tracker = Tracking(
            t.project_name,
            t.experiment_name,
            t.logger,
            str(self.output_dir),
            config=None,
            total_steps=t.total_training_steps,
        )
        self._load_checkpoint()
        if self.global_step == 0:  # a new run: an earlier run's best is not this one's
            (self.ckpt_dir / BEST_FILE).unlink(missing_ok=True)
        last: dict[str, float] = {}
        started = time.monotonic()  # trainer.max_minutes counts from here: validations included
        try:
            if t.val_before_train and self.global_step == 0 and t.test_freq > 0:
                self._wait_for_services(0, None)
                metrics = self._validate()
                if self._is_new_best(metrics):
                    self._mark_best(metrics)
                tracker.log(metrics, step=0)
            progress = progress_bar(t.total_training_steps, self.global_step)
            while self.global_step < t.total_training_steps:
                ahead, self._ahead = self._ahead, None
                # before: what a checkpoint of the last completed step must hold as the dataloader
                before = self.train_loader.state_dict() if ahead is None else ahead.loader_before
                self._wait_for_services(self.global_step, before)
                self.global_step += 1
                if ahead is None:
                    tasks, ready = self.train_loader.next_batch(), None
                else:
                    tasks, ready = ahead.tasks, ahead.job
                metrics = self._guarded_step(tasks, before, ready)
                metrics["train/epoch"] = float(self.train_loader.epoch)
                out_of_time = t.max_minutes is not None and (time.monotonic() - started) / 60 >= t.max_minutes
                is_last = self.global_step == t.total_training_steps or out_of_time
                new_best = False
                if t.test_freq > 0 and (self.global_step % t.test_freq == 0 or is_last):
                    self._settle()
                    metrics.update(self._validate())
                    new_best = self._is_new_best(metrics)
                if new_best or (
                    t.save_freq > 0
                    and (self.global_step % t.save_freq == 0 or is_last or self.global_step == t.stop_after_step)
                ):
                    with PhaseTimer(metrics)("save_checkpoint"):
                        self._save_checkpoint()
                        if new_best:  # after the save: the file never names a checkpoint that is not there
                            self._mark_best(metrics)
                tracker.log(metrics, step=self.global_step)
                last = metrics
                if progress is not None:
                    progress.update(1)
                if out_of_time:
                    self._wait_ahead()
                    print(
                        f"[trainer] stopping after step {self.global_step}: trainer.max_minutes={t.max_minutes} "
                        f"spent ({(time.monotonic() - started) / 60:.1f} min)",
                        flush=True,
                    )
                    break
                if t.stop_after_step is not None and self.global_step >= t.stop_after_step:
                    self._wait_ahead()
                    print(f"[trainer] stopping after step {self.global_step} (trainer.stop_after_step)", flush=True)
                    break
        finally:
            tracker.close()
            if tracker.jsonl_path.is_file():
                from verl.utils.plot import plot_metrics

                plot_metrics(tracker.jsonl_path, self.output_dir / "metrics.png")
        return last

    def _guarded_step(
        self, tasks: DataProto, loader_before: dict, ready: Future | Collected | None = None
    ) -> dict[str, float]:
        """`train_step`, rolled out once more when too many trajectories failed; a second failure or a
        dead worker stops the run (see the module docstring). ``loader_before``: the dataloader before this
        step's tasks were drawn; ``ready``: their rollout, started ahead."""
        step = self.global_step
        try:
            try:
                metrics = self.train_step(tasks, ready)
                metrics["trainer/step_retries"] = 0.0
            except TooManyFailures as exc:
                print(f"[trainer] step {step}: {exc}; rolling the step out again (once)", flush=True)
                self._wait_for_services(step - 1, loader_before)
                metrics = self.train_step(tasks)
                metrics["trainer/step_retries"] = 1.0
        except TooManyFailures as exc:
            self._stop(f"step {step} failed twice: {exc}", step - 1, loader_before)
        except WorkerError as exc:  # the workers cannot save: the latest checkpoint on disk is where to resume
            self._stop(f"a worker died in step {step}: {exc}", step - 1, None)
        metrics["memory/rss_gb/driver"] = current_rss_gb()
        if self.services is not None:
            metrics.update(self.services.metrics())
        return metrics

    def _wait_for_services(self, completed: int, loader_state: dict | None) -> None:
        """Block until the rollout's services can serve; stop the run if they never will."""
        if self.services is None:
            return
        problem = self.services.wait_ready(SERVICES_WAIT_S)
        if problem is not None:
            self._stop(problem, completed, loader_state)

    def _latest_step(self) -> int | None:
        marker = self.ckpt_dir / LATEST_MARKER
        return int(marker.read_text().strip()) if marker.is_file() else None

    def _stop(self, cause: str, completed: int, loader_state: dict | None) -> None:
        """Checkpoint step ``completed`` (with the dataloader as it was after it) unless ``loader_state`` is None
        or it is saved already, then raise `RunStopped` naming the cause and the checkpoint to resume from."""
        self._ahead = None  # a rollout running ahead is given up: the loader state below draws its tasks again
        if loader_state is not None and completed > 0 and self._latest_step() != completed:
            self.global_step = completed
            self.train_loader.load_state_dict(loader_state)
            self._save_checkpoint()
        latest = self._latest_step()
        where = (
            f"the latest checkpoint is {self.ckpt_dir / f'global_step_{latest}'}; "
            "re-run the same command to resume from it"
            if latest is not None
            else "no checkpoint was written; re-running starts from the beginning"
        )
        print(f"[trainer] stopping: {cause}", flush=True)
        raise RunStopped(f"{cause}\n{where}")


def _trajectory_rows(batch: DataProto) -> list[int]:
    """The first row of each trajectory in ``batch``: every row in trajectory mode; in step-wise mode (one row per
    turn, each carrying its trajectory's outcome) the first row of each ``traj_uid``."""
    nt = batch.non_tensor_batch
    if "traj_uid" not in nt:
        return list(range(len(batch)))
    first: dict[object, int] = {}
    for row, uid in enumerate(nt["traj_uid"]):
        first.setdefault(uid, row)
    return list(first.values())


def _success_rate(batch: DataProto) -> float:
    """The share of ``batch``'s live trajectories that succeeded, each counted once (`_trajectory_rows`), failed
    ones left out; 0.0 when none is live."""
    nt = batch.non_tensor_batch
    live = [row for row in _trajectory_rows(batch) if not nt["failed"][row]]
    return sum(bool(nt["success"][row]) for row in live) / len(live) if live else 0.0


def _groups(batch: DataProto) -> list[DataProto]:
    """The batch split by ``uid`` (rows of one group, in their order), groups in order of first appearance."""
    order: dict[object, list[int]] = {}
    for row, uid in enumerate(batch.non_tensor_batch["uid"]):
        order.setdefault(uid, []).append(row)
    return [batch[rows] for rows in order.values()]


def dump_config(cfg: PPOConfig, path: Path, precision: dict | None = None) -> None:
    """The resolved config as JSON, plus the dtype chosen for each role and why (``precision``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dataclasses.asdict(cfg)
    if precision is not None:
        data["precision"] = precision
    path.write_text(json.dumps(data, indent=2, default=str))
