"""The Ray workers: `ActorRolloutRefWorker` (policy, reference, rollout engine in one process per rank)
and `CriticWorker`.

Roles of `ActorRolloutRefWorker` (``role=``): any ``_``-joined subset of
``actor``, ``rollout``, ``ref`` (default ``actor_rollout_ref``, verl's hybrid
engine). With both actor and rollout, every ``update_actor`` ends by pushing
the new weights into the live engine.

With ``model.lora_rank`` > 0 the actor trains LoRA adapters on frozen base
weights (`verl.utils.lora`); the reference is then the actor's own module with
its adapters off (no second copy of the weights), the engine receives merged
weights ``W + (alpha / r) B A``, and checkpoints hold the adapters and their
optimiser state (the base weights are ``model.path``'s).

Batch keys (see `verl.utils.torch_functional` for the layout):
``input_ids``, ``attention_mask``, ``position_ids``, ``responses``,
``response_mask``; the update also reads ``old_log_probs``, ``advantages`` and,
with a KL loss, ``ref_log_prob``; the critic update reads ``values`` and ``returns``.
"""

from __future__ import annotations

import resource
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from verl.core_algos import masked_mean
from verl.protocol import DataProto
from verl.single_controller.base import Dispatch, Worker, register
from verl.utils import fsdp_utils
from verl.utils.lora import apply_lora, lora_disabled
from verl.utils.memory import current_rss_gb, release_free_heap
from verl.utils.precision import announce, resolve_dtype
from verl.utils.quiet_logs import set_torch_threads
from verl.utils.typed_config import from_dict
from verl.workers.actor import PPOActor
from verl.workers.config import ActorRolloutRefConfig, CriticConfig, resolve_policy_precision
from verl.workers.critic import PPOCritic, ValueModel
from verl.workers.rollout.base import RolloutEngine, Sampling, SamplingParams
from verl.workers.token_logprobs import scoring_sampling

ROLES = ("actor", "rollout", "ref")
ROLLOUT_GROUP = (
    "rollout"  # generation calls: with this concurrency group they run beside training (trainer.staleness=1)
)


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def _describe_lora(spec: dict | None) -> str:
    return (
        f"LoRA rank {spec['rank']}, alpha {spec['alpha']} on {spec['target_modules']}" if spec else "full fine-tuning"
    )


def _load_causal_lm(path: str, dtype: torch.dtype, attn_implementation: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn_implementation)


class ActorRolloutRefWorker(Worker):
    """One rank of the policy worker group."""

    def __init__(self, config: dict | ActorRolloutRefConfig, role: str = "actor_rollout_ref"):
        super().__init__()
        self.config = from_dict(ActorRolloutRefConfig, config, "actor_rollout_ref")
        roles = set(role.split("_"))
        if not roles or not roles <= set(ROLES):
            raise ValueError(f"role '{role}' must join some of {list(ROLES)} with '_'")
        self.roles = roles
        set_torch_threads(self.config.num_threads)
        self.actor: PPOActor | None = None
        self.ref: PPOActor | None = None
        self.rollout: RolloutEngine | None = None
        self._update_count = 0

    # ------------------------------------------------------------------ set-up
    @register(Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        """Load the weights, shard them, and start the rollout engine."""
        cfg = self.config
        if self.roles & {"actor", "ref"}:  # a rollout-only worker also runs in-process, without a process group
            self.init_distributed(cfg.device)
        torch.manual_seed(cfg.seed + self.rank)
        self.precision = resolve_policy_precision(cfg)
        for role in sorted(self.roles):
            announce(f"{role} rank {self.rank}", self.precision[role])
        if "actor" in self.roles:
            module = _load_causal_lm(cfg.model.path, torch.float32, cfg.model.attn_implementation)
            if cfg.model.lora_rank:  # before sharding: FSDP2 shards the frozen base and the adapters alike
                apply_lora(module, cfg.model.lora_rank, cfg.model.lora_alpha, cfg.model.target_modules, seed=cfg.seed)
            module, optimizer, scheduler = fsdp_utils.prepare_for_training(
                module, cfg.device, cfg.actor.optim, cfg.model.enable_gradient_checkpointing
            )
            self.actor = PPOActor(module, optimizer, scheduler, cfg.actor, cfg.device, self.precision["actor"].dtype)
        if "ref" in self.roles and self.actor is not None and cfg.model.lora_rank:
            # the policy's own module: `compute_ref_log_prob` turns its adapters off,
            # leaving the base weights (B = 0 at the start)
            self.ref = PPOActor(self.actor.module, None, None, cfg.actor, cfg.device, self.precision["ref"].dtype)
        elif "ref" in self.roles:
            # fp32 weights under the same autocast as the actor: one log-prob path, so KL(identical weights) = 0
            module = _load_causal_lm(cfg.model.path, torch.float32, cfg.model.attn_implementation)
            module.requires_grad_(False)
            module = fsdp_utils.shard_module(module.to(cfg.device), cfg.device)
            self.ref = PPOActor(module, None, None, cfg.actor, cfg.device, self.precision["ref"].dtype)
        if "rollout" in self.roles:
            self.rollout = self._build_rollout()
        set_torch_threads(cfg.num_threads)

    def _build_rollout(self) -> RolloutEngine:
        cfg = self.config
        dtype = self.precision["rollout"].dtype
        if cfg.rollout.name == "vllm":
            from verl.workers.rollout.vllm_rollout import VLLMRollout

            return VLLMRollout(cfg.model.path, cfg.rollout, cfg.device, self.local_rank, cfg.num_threads, dtype=dtype)
        from verl.workers.rollout.hf_rollout import HFRollout

        return HFRollout(cfg.model.path, dtype=dtype, device=cfg.device, weight_rounding=cfg.rollout.weight_rounding)

    def _need(self, role: str):
        obj = {"actor": self.actor, "ref": self.ref, "rollout": self.rollout}[role]
        if obj is None:
            raise RuntimeError(
                f"this worker has no '{role}' role (roles: {sorted(self.roles)}) or init_model was not called"
            )
        return obj

    # ------------------------------------------------------------------ rollout
    def _rollout_engine(self) -> RolloutEngine:
        """The engine, with this thread's torch thread count set: in the rollout concurrency group the
        calls run on a thread of their own, and OpenMP keeps the count per thread. (The CPU engine
        replaces ``torch.set_num_threads`` with a no-op once it has bound its threads, so the
        setter taken before, `verl.utils.quiet_logs.set_torch_threads`, is called.)"""
        if torch.get_num_threads() != self.config.num_threads:
            set_torch_threads(self.config.num_threads)
        return self._need("rollout")

    @register(Dispatch.DP_COMPUTE_PROTO, concurrency_group=ROLLOUT_GROUP)
    def generate_sequences(self, data: DataProto) -> DataProto:
        """Sample a continuation for each row's ``prompt_ids`` (a list of token ids).

        Optional per-row ``seed``; ``meta_info`` carries the sampling (``temperature``, ``top_p``,
        ``top_k``, all required: ValueError naming a missing one), ``do_sample`` (False: greedy),
        ``max_tokens`` (default: the rollout config's ``response_length``), ``stop`` and ``stop_token_ids``.
        Returns ``response_ids``, ``response_log_probs`` and ``finish_reason`` per row.
        """
        engine: RolloutEngine = self._rollout_engine()
        params = self._sampling_params(data)
        prompts = [list(map(int, p)) for p in data.non_tensor_batch["prompt_ids"]]
        start = time.perf_counter()
        outs = engine.generate(prompts, params)
        release_free_heap()
        return DataProto.from_dict(
            non_tensors={
                "response_ids": [o.token_ids for o in outs],
                "response_log_probs": [o.log_probs for o in outs],
                "finish_reason": np.array([o.finish_reason for o in outs], dtype=object),
            },
            meta_info={"timing_s/generate": time.perf_counter() - start},
        )

    def _sampling_params(self, data: DataProto) -> list[SamplingParams]:
        """Each row's settings (see `generate_sequences`), with the row's ``seed`` if any."""
        meta = data.meta_info
        sampling = asdict(Sampling.from_meta(meta).generated(meta.get("do_sample", True) is not False))
        seeds = data.non_tensor_batch.get("seed")
        return [
            SamplingParams(
                **sampling,
                max_tokens=int(meta.get("max_tokens", self.config.rollout.response_length)),
                stop=list(meta.get("stop", [])),
                stop_token_ids=list(meta.get("stop_token_ids", [])),
                seed=None if seeds is None else int(seeds[i]),
            )
            for i in range(len(data))
        ]

    @register(Dispatch.ROUTE_PROTO, concurrency_group=ROLLOUT_GROUP)
    def submit_generation(self, data: DataProto) -> DataProto:
        """Queue one request per row without waiting for it: ``request_id`` (a str, unique among
        unfinished requests), ``prompt_ids``, ``route`` (an int: the group sends a row to rank
        ``route % world_size``, so one trajectory keeps one rank and its prefix cache), optional
        ``seed``; sampling settings as in `generate_sequences`.  Collect outputs with `poll_generation`."""
        engine: RolloutEngine = self._rollout_engine()
        if len(data):
            ids = [str(i) for i in data.non_tensor_batch["request_id"]]
            prompts = [list(map(int, p)) for p in data.non_tensor_batch["prompt_ids"]]
            engine.submit(list(zip(ids, prompts, self._sampling_params(data))))
        return DataProto()

    @register(Dispatch.ALL_TO_ALL_CONCAT, concurrency_group=ROLLOUT_GROUP)
    def poll_generation(self, max_wait_s: float = 0.0) -> DataProto:
        """Generate until one of this rank's submitted requests finishes or ``max_wait_s`` passes
        (at once when none is unfinished); returns the finished rows: ``request_id``,
        ``response_ids``, ``response_log_probs``, ``finish_reason`` (possibly no rows);
        ``meta_info["unfinished"]`` counts the requests still running on rank 0."""
        engine: RolloutEngine = self._rollout_engine()
        done = engine.poll(max_wait_s)
        return DataProto.from_dict(
            non_tensors={
                "request_id": [i for i, _ in done],
                "response_ids": [o.token_ids for _, o in done],
                "response_log_probs": [o.log_probs for _, o in done],
                "finish_reason": [o.finish_reason for _, o in done],
            },
            meta_info={"unfinished": engine.unfinished()},
        )

    @register(Dispatch.ONE_TO_ALL, concurrency_group=ROLLOUT_GROUP)
    def cancel_generation(self) -> None:
        """Abort every unfinished submitted request (after a failed rollout)."""
        self._rollout_engine().abort_all()

    @register(Dispatch.ONE_TO_ALL, concurrency_group=ROLLOUT_GROUP)
    def prefix_cache_stats(self) -> dict[str, int] | None:
        """The engine's prefix-cache counts since it started (``requests``, ``queries``, ``hits``
        prompt tokens), or None where the engine does not count them."""
        return self._rollout_engine().prefix_cache_stats()

    # ------------------------------------------------------------------ log-probs
    @staticmethod
    def _sampling(meta: dict) -> dict:
        """The distribution log-probs are recomputed under: `scoring_sampling` of the sampling the call's
        ``meta_info`` carries (`Sampling.from_meta`: ValueError naming a missing key)."""
        return scoring_sampling(Sampling.from_meta(meta))

    def _log_probs(
        self, model: PPOActor, data: DataProto, micro_rows: int, max_tokens: int, with_entropy: bool
    ) -> dict:
        return model.compute_log_prob(
            data,
            sampling=self._sampling(data.meta_info),
            with_entropy=with_entropy,
            micro_batch_rows=micro_rows,
            max_tokens=max_tokens if self.config.actor.use_dynamic_bsz else None,
        )

    @register(Dispatch.DP_COMPUTE_PROTO)
    def compute_log_prob(self, data: DataProto) -> DataProto:
        """``old_log_probs`` and ``entropys`` ``(B, T)`` under the current policy and the sampling ``meta_info``
        carries (`_sampling`), as every log-prob call and the update."""
        cfg = self.config.actor
        out = self._log_probs(
            self._need("actor"), data, cfg.log_prob_micro_batch_size_per_gpu, cfg.log_prob_max_token_len_per_gpu, True
        )
        return DataProto.from_dict({"old_log_probs": out["log_probs"], "entropys": out["entropys"]})

    @register(Dispatch.DP_COMPUTE_PROTO)
    def compute_ref_log_prob(self, data: DataProto) -> DataProto:
        """``ref_log_prob`` ``(B, T)`` under the frozen reference policy (with LoRA:
        the policy's module, adapters off)."""
        cfg, ref = self.config.ref, self._need("ref")
        with lora_disabled(ref.module):
            out = self._log_probs(
                ref, data, cfg.log_prob_micro_batch_size_per_gpu, cfg.log_prob_max_token_len_per_gpu, False
            )
        return DataProto.from_dict({"ref_log_prob": out["log_probs"]})

    # ------------------------------------------------------------------ update
    @register(Dispatch.DP_COMPUTE_PROTO)
    def update_actor(self, data: DataProto) -> DataProto:
        """PPO update on this rank's rows, then weight sync into the rollout engine unless
        ``meta_info["sync_weights"]`` is False (the engine may be generating: the driver then calls
        `sync_rollout_weights` once it is idle).

        Returns an empty DataProto whose ``meta_info["metrics"]`` holds the
        ``actor/*`` metrics (already averaged over ranks) and timings.
        """
        actor: PPOActor = self._need("actor")
        start = time.perf_counter()
        actor.take_token_counts("update_actor")
        metrics = actor.update_policy(data, self._sampling(data.meta_info), seed=self.config.seed + self._update_count)
        metrics.update(actor.take_token_counts("update_actor"))
        self._update_count += 1
        metrics["timing_s/update_actor"] = time.perf_counter() - start
        if self.rollout is not None and data.meta_info.get("sync_weights", True):
            metrics["timing_s/weight_sync"] = self.sync_rollout_weights()
        metrics["perf/max_memory_rss_gb/actor_rollout_ref"] = _peak_rss_gb()
        metrics["memory/rss_gb/actor_rollout_ref"] = current_rss_gb()
        return DataProto(meta_info={"metrics": metrics})

    @register(Dispatch.ONE_TO_ALL)
    def sync_rollout_weights(self) -> float:
        """Push the policy's full weights (LoRA adapters merged) into the engine (no generation may be running);
        returns the seconds it took."""
        start = time.perf_counter()
        state = fsdp_utils.full_model_state_dict(self._need("actor").module, cpu_offload=False)
        self._need("rollout").update_weights(state.items())
        del state
        release_free_heap()
        return time.perf_counter() - start

    # ------------------------------------------------------------------ checkpoints
    def _lora_spec(self) -> dict | None:
        m = self.config.model
        return (
            {"rank": m.lora_rank, "alpha": m.lora_alpha, "target_modules": list(m.target_modules)}
            if m.lora_rank
            else None
        )

    @register(Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, path: str, hf_export: bool = True) -> None:
        """Trained weights (with LoRA: the adapters), optimiser, scheduler and RNG in ``path``; the base model and
        LoRA setting in ``actor_worker.pt``; plus a Hugging Face folder ``path/huggingface`` (adapters merged)."""
        actor: PPOActor = self._need("actor")
        actor.save(path, "actor")
        state = {"update_count": self._update_count, "model_path": self.config.model.path, "lora": self._lora_spec()}
        if hf_export:
            weights = fsdp_utils.full_model_state_dict(actor.module, cpu_offload=True)
            if self.rank == 0:
                fsdp_utils.export_hf(weights, self.config.model.path, Path(path) / "huggingface")
        if self.rank == 0:
            torch.save(state, Path(path) / "actor_worker.pt")
        if dist.is_initialized():
            dist.barrier()

    @register(Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, path: str) -> None:
        """Restore what `save_checkpoint` wrote and refresh the rollout engine's weights."""
        actor: PPOActor = self._need("actor")
        worker_state = Path(path) / "actor_worker.pt"
        state = torch.load(worker_state, weights_only=False) if worker_state.is_file() else {}
        if state.get("lora") != self._lora_spec():
            raise ValueError(
                f"{path} was saved with {_describe_lora(state.get('lora'))}, but this run has "
                f"{_describe_lora(self._lora_spec())} (actor_rollout_ref.model.lora_rank, lora_alpha, target_modules)"
            )
        actor.load(path, "actor")
        if state:
            self._update_count = state["update_count"]
        if self.rollout is not None:
            self.sync_rollout_weights()

    @register(Dispatch.ONE_TO_ALL)
    def memory_stats(self) -> dict:
        return {"rank": self.rank, "peak_rss_gb": _peak_rss_gb()}

    def shutdown(self) -> None:
        if self.rollout is not None:
            self.rollout.shutdown()
            self.rollout = None
        self.leave_distributed()


class CriticWorker(Worker):
    """One rank of the value-model worker group."""

    def __init__(self, config: dict | CriticConfig):
        super().__init__()
        self.config = from_dict(CriticConfig, config, "critic")
        set_torch_threads(self.config.num_threads)
        self.critic: PPOCritic | None = None
        self._update_count = 0

    @register(Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        cfg = self.config
        self.init_distributed(cfg.device)
        torch.manual_seed(cfg.seed + self.rank)
        precision = resolve_dtype(cfg.mixed_precision, cfg.device, "train")
        announce(f"critic rank {self.rank}", precision)
        module = ValueModel.from_pretrained(cfg.model.path, cfg.model.attn_implementation)
        module, optimizer, scheduler = fsdp_utils.prepare_for_training(
            module, cfg.device, cfg.optim, cfg.model.enable_gradient_checkpointing, recomputed=module.backbone
        )
        self.critic = PPOCritic(module, optimizer, scheduler, cfg, precision.dtype)

    def _need_critic(self) -> PPOCritic:
        if self.critic is None:
            raise RuntimeError("CriticWorker.init_model was not called")
        return self.critic

    @register(Dispatch.DP_COMPUTE_PROTO)
    def compute_values(self, data: DataProto) -> DataProto:
        """``values`` ``(B, T)``: V of the state before each response token; with ``meta_info["keep_graph"]``
        the forward is kept for the next `update_critic` (`PPOCritic.compute_values`)."""
        values = self._need_critic().compute_values(data, keep_graph=data.meta_info.get("keep_graph", False))
        return DataProto.from_dict({"values": values})

    @register(Dispatch.DP_COMPUTE_PROTO)
    def update_critic(self, data: DataProto) -> DataProto:
        """Clipped value-loss epochs; ``meta_info["metrics"]`` holds the ``critic/*`` metrics."""
        start = time.perf_counter()
        critic = self._need_critic()
        critic.take_token_counts("update_critic")
        metrics = critic.update_critic(data, seed=self.config.seed + self._update_count)
        metrics.update(critic.take_token_counts("update_critic"))
        self._update_count += 1
        mask = data.batch["response_mask"].float()
        metrics["critic/values/mean"] = float(masked_mean(data.batch["values"], mask))
        metrics["critic/returns/mean"] = float(masked_mean(data.batch["returns"], mask))
        metrics["timing_s/update_critic"] = time.perf_counter() - start
        metrics["perf/max_memory_rss_gb/critic"] = _peak_rss_gb()
        metrics["memory/rss_gb/critic"] = current_rss_gb()
        return DataProto(meta_info={"metrics": metrics})

    @register(Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, path: str) -> None:
        self._need_critic().save(path, "critic")
        if self.rank == 0:
            torch.save({"update_count": self._update_count}, Path(path) / "critic_worker.pt")

    @register(Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, path: str) -> None:
        self._need_critic().load(path, "critic")
        worker_state = Path(path) / "critic_worker.pt"
        if worker_state.is_file():
            self._update_count = torch.load(worker_state, weights_only=False)["update_count"]

    def shutdown(self) -> None:
        self.leave_distributed()
