"""`RayPPOTrainer`: the driver. It reads like the algorithm; the worker groups hide the distribution.

One step (`train_step`)::

    batch      = rollout.run_llm_loop(tasks)               # e.g. multi-turn agent episodes: what happened, per row
    scores     = scorer(batch)                             # outcome and token-level scores R (reward path, and a
                                                           # reward model or judge with reward_model.enable)
    plan       = plan_step(config, rows)                   # the step's decisions, made once (step_plan.py)
    batch     += actor.compute_log_prob(batch)             # old log-probs, unless the update supplies them
    batch     += ref.compute_ref_log_prob(batch)           # when a KL term is on
    batch     += critic.compute_values(batch)              # GAE only
    kl         = -beta * KL                                # in-reward KL, its own input (else none)
    advantages = estimator(scores + kl, values, mask, groups)  # core_algos registry
    critic.update_critic(batch); actor.update_actor(batch) # the actor update ends with the weight sync

Around the steps, each in its own module beside this one:

* `collect`: roll out and score a step's batch; dynamic sampling (DAPO) and ReMax's greedy baseline;
* `run_loop`: resume, the validation and checkpoint schedule, stopping, and what a fault does (`faults`);
* `checkpoints`: the checkpoints folder (atomic save, resume, pruning, the best validation);
* `one_step_off`: the next step's rollout running while this step trains (``trainer.staleness=1``);
* `validation`: the dev metrics.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import torch

from verl import batch_keys as K
from verl import core_algos
from verl.protocol import DataProto
from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
from verl.trainer.ppo import run_loop
from verl.trainer.ppo.checkpoints import AHEAD_FILE, CheckpointStore
from verl.trainer.ppo.collect import BatchCollector
from verl.trainer.ppo.config import PPOConfig
from verl.trainer.ppo.faults import check_failures
from verl.trainer.ppo.judge import Judge
from verl.trainer.ppo.metrics import compute_data_metrics, compute_throughput_metrics
from verl.trainer.ppo.one_step_off import Collected, RolloutAhead
from verl.trainer.ppo.rollout import RolloutServices, load_rollout_plugin
from verl.trainer.ppo.scoring import Scorer
from verl.trainer.ppo.step_journal import StepJournals, sampling_fingerprint
from verl.trainer.ppo.step_plan import StepPlan, for_worker, plan_step, prepare_for_update
from verl.trainer.ppo.validation import validate
from verl.utils.dataset import TaskDataLoader, read_tasks
from verl.utils.timing import LONG_PHASE_S, PhaseTimer
from verl.workers.fsdp_workers import ROLLOUT_GROUP, ActorRolloutRefWorker, CriticWorker
from verl.workers.reward_model import RewardModelWorker


class RayPPOTrainer:
    def __init__(self, config: PPOConfig, tokenizer, services: RolloutServices | None = None):
        self.config = config
        self.response_budget = config.response_budget  # the rollout plugin's, asked once
        self.tokenizer = tokenizer
        self.services = services
        self.global_step = 0
        self.kl_ctrl = core_algos.kl_controller(config.algorithm.kl_ctrl)
        d, t = config.data, config.trainer
        self.train_loader = TaskDataLoader(
            read_tasks(d.train_files), d.train_batch_size, shuffle=d.shuffle, seed=d.seed
        )
        val_tasks = read_tasks(d.val_files, d.val_max_samples)
        self.val_loader = TaskDataLoader(val_tasks, min(d.val_batch_size, len(val_tasks)), shuffle=False)
        self.output_dir = Path(t.output_dir)
        self.checkpoints = CheckpointStore(
            t.default_local_dir, t.max_ckpt_to_keep, t.keep_best, config.actor_rollout_ref.model.path
        )
        self.journals = StepJournals(
            t.default_local_dir, sampling_fingerprint(config.agent, config.actor_rollout_ref.rollout)
        )
        self.scorer = Scorer(config, tokenizer)
        self.collector = BatchCollector(config, self.scorer, self.train_loader, self.journals, self.output_dir)
        self.overlap = t.staleness > 0
        self.ahead = RolloutAhead()  # holds a rollout only one-step-off
        self._policy_version = 0  # actor updates so far
        self._engine_version = 0  # the policy version whose weights the rollout engine holds

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
            self.scorer.judge = Judge(cfg.reward_model.judge, t.device, self.tokenizer)
        elif cfg.reward_model.uses_model:
            rm = RayClassWithInitArgs(RewardModelWorker, config=cfg.reward_model)
            self.scorer.rm_wg = RayWorkerGroup(self.pool, rm)
            loading.append(self.scorer.rm_wg.start("init_model"))
        for future in loading:
            future.get()
        groups = [g for g in (self.actor_rollout_wg, self.critic_wg, self.scorer.rm_wg) if g is not None]
        print("[trainer] workers: " + "; ".join(f"{g.cls_name} pids {g.pids()}" for g in groups), flush=True)
        print(
            "[trainer] placement: "
            + "; ".join(f"{g.cls_name} ranks on nodes {[node[:8] for node in g.node_ids()]}" for g in groups),
            flush=True,
        )
        # the training rollout (n samples per task) and the validation one (one each), from the plugin data.rollout
        plugin = load_rollout_plugin(cfg.data.rollout)
        n = int(cfg.agent.get("n", 1))
        self.collector.rollout = plugin.build(cfg, self.tokenizer, self.actor_rollout_wg, n)
        self.collector.val_rollout = plugin.build(cfg, self.tokenizer, self.actor_rollout_wg, 1)

    def shutdown(self) -> None:
        self.ahead.shutdown()
        for wg in (getattr(self, "actor_rollout_wg", None), getattr(self, "critic_wg", None), self.scorer.rm_wg):
            if wg is not None:
                wg.shutdown()
        self.scorer.close()
        for rollout in (self.collector.rollout, self.collector.val_rollout):
            if rollout is not None and hasattr(rollout, "close"):
                rollout.close()
        if getattr(self, "pool", None) is not None:
            self.pool.release()

    def fit(self) -> dict[str, float]:
        """Train for ``trainer.total_training_steps`` steps (`run_loop.fit`); returns the last step's metrics."""
        return run_loop.fit(self)

    # ------------------------------------------------------------------ one step
    def train_step(self, tasks: DataProto, ready: Future | Collected | None = None) -> dict[str, float]:
        """One step on ``tasks``; ``ready``: their rollout, started ahead (one-step-off), else it runs here."""
        cfg = self.config
        metrics: dict[str, float] = {}
        timer = PhaseTimer(metrics, f"[step {self.global_step}]", LONG_PHASE_S)  # timing_s/<phase>
        step_start = time.perf_counter()
        collected = self._collected(tasks, ready, timer, metrics)
        metrics.update(collected.metrics)
        batch = collected.batch
        if core_algos.get_estimator(cfg.algorithm.adv_estimator).greedy_baseline:  # before the failure check:
            metrics.update(self.collector.greedy_baselines(tasks, batch, self.global_step))  # no baseline: failed
        check_failures(batch, cfg.trainer.max_failed_fraction)
        metrics["rollout/staleness"] = float(self._policy_version - collected.policy_version)
        if self.overlap:
            self._launch_ahead(metrics)
        batch = prepare_for_update(batch, cfg)
        plan = plan_step(cfg, len(batch), K.ROLLOUT_LOG_PROBS in batch.batch)

        if not plan.old_log_probs_from_update:
            with timer("old_log_prob"):
                old = self.actor_rollout_wg.compute_log_prob(for_worker(batch))
            entropys = old.pop(batch_keys=[K.ENTROPYS]).batch[K.ENTROPYS]
            mask = batch.batch[K.RESPONSE_MASK].float()
            metrics["actor/entropy_rollout"] = float(core_algos.masked_mean(entropys, mask))
            batch.union(old)
        if cfg.use_ref:
            with timer("ref"):
                batch.union(self.actor_rollout_wg.compute_ref_log_prob(for_worker(batch)))
        if self.critic_wg is not None:
            with timer("values"):
                data = for_worker(batch)
                data.meta_info["keep_graph"] = plan.keep_values_forward
                batch.union(self.critic_wg.compute_values(data))

        kl = None
        if cfg.algorithm.use_kl_in_reward:
            kl, kl_metrics = core_algos.kl_reward(batch, self.kl_ctrl, cfg.algorithm.kl_penalty)
            metrics.update(kl_metrics)
        with timer("adv"):
            metrics.update(self.compute_advantage(batch, kl))

        if self.critic_wg is not None:
            with timer("update_critic"):
                data = for_worker(batch, K.VALUES, K.RETURNS)
                metrics.update(self.critic_wg.update_critic(data).meta_info["metrics"])
        if self.global_step > cfg.algorithm.critic_warmup:
            with timer("update_actor_total"):
                metrics.update(self._update_actor(batch, plan))
        metrics.update(
            compute_data_metrics(batch, use_critic=self.critic_wg is not None, response_budget=self.response_budget)
        )
        metrics["timing_s/step"] = time.perf_counter() - step_start
        metrics.update(compute_throughput_metrics(batch, metrics["timing_s/step"], cfg.world_size))
        return metrics

    def compute_advantage(self, batch: DataProto, kl: torch.Tensor | None = None) -> dict[str, float]:
        """Fill ``token_level_rewards``, ``advantages`` and ``returns`` with the configured estimator; returns its
        ``adv/*`` metrics.

        ``kl`` (B, T) is the in-reward KL term (`core_algos.kl_reward`), or None: the estimator gets
        ``token_level_rewards = token_level_scores + kl`` and each row's outcome score ``R + sum_t kl_t``.
        Failed trajectories (masked out of the loss) get a group of their own, so they do not shift their task's
        baseline. The estimator gets the fields of its own options (``algorithm.<name>``, e.g.
        ``algorithm.gigpo``) when it registered any, and no other's.
        """
        alg = self.config.algorithm
        own = alg.options()
        nt, b = batch.non_tensor_batch, batch.batch
        failed = np.array(nt.get(K.FAILED, [False] * len(batch)), dtype=bool)
        index = np.array([f"failed-{i}" if failed[i] else uid for i, uid in enumerate(nt[K.UID])], dtype=object)
        kl = torch.zeros_like(b[K.TOKEN_LEVEL_SCORES]) if kl is None else kl
        b[K.TOKEN_LEVEL_REWARDS] = b[K.TOKEN_LEVEL_SCORES] + kl
        scores = b[K.OUTCOME_SCORES] + kl.sum(dim=-1)
        metrics: dict[str, float] = {}
        fn = core_algos.get_estimator(alg.adv_estimator).fn
        advantages, returns = fn(
            token_level_rewards=b[K.TOKEN_LEVEL_REWARDS],
            response_mask=b[K.RESPONSE_MASK].float(),
            index=index,
            scores=scores,
            values=b.get(K.VALUES),
            reward_baselines=b.get(K.REWARD_BASELINES),
            gamma=alg.gamma,
            lam=alg.lam,
            norm_adv_by_std_in_grpo=alg.norm_adv_by_std_in_grpo,
            non_tensor_batch=nt,
            metrics=metrics,
            **(dataclasses.asdict(own) if dataclasses.is_dataclass(own) else {}),
        )
        b[K.ADVANTAGES], b[K.RETURNS] = advantages, returns
        return metrics

    def _collected(
        self, tasks: DataProto, ready: Future | Collected | None, timer: PhaseTimer, metrics: dict[str, float]
    ) -> Collected:
        """The step's scored batch: the rollout started ahead (waited for), else one run now, newest weights."""
        if isinstance(ready, Future):
            with timer("rollout_wait"):
                return ready.result()
        if ready is not None:
            return ready
        self._sync_engine(metrics)
        return self.collector.collect(tasks, self.global_step, self._engine_version)

    def _update_actor(self, batch: DataProto, plan: StepPlan) -> dict[str, float]:
        """The actor's update on what the plan says it reads; it ends with the weight sync unless one-step-off,
        where the engine is busy and is synced when idle."""
        data = for_worker(batch, *plan.actor_inputs)
        data.meta_info["sync_weights"] = not self.overlap
        metrics = self.actor_rollout_wg.update_actor(data).meta_info["metrics"]
        self._policy_version += 1
        if not self.overlap:
            self._engine_version = self._policy_version
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
        version = self._engine_version
        self.ahead.launch(tasks, before, lambda: self.collector.collect(tasks, step, version))

    def settle(self) -> None:
        """An idle engine with the newest weights (for validation)."""
        self.ahead.wait()
        self._sync_engine({})

    def validate(self) -> dict[str, float]:
        rollout, sample = self.collector.val_rollout, self.config.trainer.val_do_sample
        return validate(self.val_loader, rollout, self.scorer.reward_manager, sample, self.global_step)

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self) -> Path:
        """Checkpoint this step (`CheckpointStore.save`): the workers' state, the rollout ahead, the trainer's."""
        loader_state, ahead = self.ahead.to_save(self.train_loader.state_dict())

        def write_parts(folder: Path) -> None:
            if ahead is not None:
                torch.save(ahead, folder / AHEAD_FILE)
            self.actor_rollout_wg.save_checkpoint(str(folder / "actor"))
            if self.critic_wg is not None:
                self.critic_wg.save_checkpoint(str(folder / "critic"))

        state = {
            "global_step": self.global_step,
            "policy_version": self._policy_version,
            "dataloader": loader_state,
            "kl_coef": self.kl_ctrl.value,
            "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
        }
        folder = self.checkpoints.save(self.global_step, write_parts, state)
        self.journals.saved(self._policy_version, folder, self.global_step)
        return folder

    def load_checkpoint(self) -> None:
        """Resume from the checkpoint ``trainer.resume_mode`` names, if any, exactly where it was."""
        t = self.config.trainer
        path = self.checkpoints.resume_path(t.resume_mode, t.resume_from_path)
        if path is None:
            return
        state = self.checkpoints.load_trainer_state(path)
        self.actor_rollout_wg.load_checkpoint(str(path / "actor"))
        if self.critic_wg is not None:
            self.critic_wg.load_checkpoint(str(path / "critic"))
        self.global_step = state["global_step"]
        self._policy_version = self._engine_version = state.get("policy_version", self.global_step)  # engine synced
        self.train_loader.load_state_dict(state["dataloader"])
        self.journals.loaded(self._policy_version, path)
        ahead = self.checkpoints.load_ahead(path)
        if ahead is not None and self.overlap:  # the pipeline as it was: the next step trains the batch ahead
            self.ahead.restore(ahead)
        elif ahead is not None:  # synchronous now: those tasks are rolled out again with the newest weights
            self.train_loader.load_state_dict(ahead["loader_before"])
        self.kl_ctrl.value = state["kl_coef"]
        random.setstate(state["rng"]["python"])
        np.random.set_state(state["rng"]["numpy"])
        torch.set_rng_state(state["rng"]["torch"])
        print(f"[trainer] resumed from {path} at step {self.global_step}", flush=True)


def dump_config(cfg: PPOConfig, path: Path, precision: dict | None = None) -> None:
    """The resolved config as JSON, plus the dtype chosen for each role and why (``precision``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dataclasses.asdict(cfg)
    if precision is not None:
        data["precision"] = precision
    path.write_text(json.dumps(data, indent=2, default=str))
