"""Typed configs of the workers (policy, critic, rollout engine, reward model, judge): dataclasses whose defaults
are the trainer YAML's (`verl.utils.typed_config.defaults_from`), each with the checks a type cannot express."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar

from verl.core_algos import KL_ESTIMATORS, LOSS_AGG_MODES
from verl.utils.precision import DTYPE_CHOICES, Precision, resolve_dtype
from verl.utils.typed_config import ConfigError, defaults_from, require, require_counts
from verl.workers.rollout.base import Sampling

T = TypeVar("T")


def _choice(value: str, choices: tuple[str, ...], where: str) -> None:
    if value not in choices:
        raise ConfigError(f"{where} must be one of {list(choices)}, got {value!r}")


# every dtype key takes "auto" (chosen from the hardware, see verl.utils.precision) or an explicit dtype
DTYPES = DTYPE_CHOICES


@dataclass
@defaults_from("ppo_trainer", "actor_rollout_ref.model")
class ModelConfig:
    """Where the weights come from and how the module is built.

    ``lora_rank`` > 0 trains low-rank adapters instead of the weights (`verl.utils.lora`): each linear
    layer named in ``target_modules`` computes ``x W^T + b + (lora_alpha / lora_rank) (x A^T) B^T`` with
    W, b frozen and only A (rank x in) and B (out x rank) trained; 0 trains every weight.
    """

    path: str
    enable_gradient_checkpointing: bool
    attn_implementation: str
    lora_rank: int
    lora_alpha: float
    target_modules: list[str]

    def validate(self, where: str) -> None:
        require(self.lora_rank >= 0, f"{where}.lora_rank", ">= 0 (0: full fine-tuning)", self.lora_rank)
        require(self.lora_alpha > 0, f"{where}.lora_alpha", "> 0", self.lora_alpha)
        if self.lora_rank and not self.target_modules:
            raise ConfigError(
                f"{where}.target_modules is empty: "
                f"LoRA (lora_rank={self.lora_rank}) needs at least one linear layer name"
            )


@dataclass
@defaults_from("ppo_trainer", "actor_rollout_ref.actor.optim")
class OptimConfig:
    """AdamW with linear warm-up, then a constant or cosine learning rate."""

    lr: float
    betas: list[float]
    weight_decay: float
    lr_warmup_steps: int
    lr_scheduler: str
    min_lr_ratio: float
    total_training_steps: int

    def validate(self, where: str) -> None:
        _choice(self.lr_scheduler, ("constant", "cosine"), f"{where}.lr_scheduler")
        require(self.lr > 0, f"{where}.lr", "> 0", self.lr)


@dataclass
class UpdateBatchingConfig:
    """How a PPO update walks its rows and reduces its loss;
    shared by the actor and the critic (`TrainableModule.run_update`)."""

    ppo_mini_batch_size: int
    ppo_micro_batch_size_per_gpu: int
    use_dynamic_bsz: bool
    ppo_max_token_len_per_gpu: int
    ppo_epochs: int
    shuffle: bool
    loss_agg_mode: str
    tree_packing: str  # on | off | auto: rows that share a prefix run it once (`verl.utils.prefix_tree`)


TREE_PACKING = ("auto", "on", "off")


def check_tree_packing(tree_packing: str, attn_implementation: str, where: str) -> None:
    """``tree_packing`` is a known mode, and ``on`` only over SDPA attention (the tree's kernel)."""
    _choice(tree_packing, TREE_PACKING, f"{where}.tree_packing")
    if tree_packing == "on" and attn_implementation != "sdpa":
        raise ConfigError(
            f"{where}.tree_packing=on needs attn_implementation=sdpa (the tree runs on SDPA), got "
            f"{attn_implementation!r}; set tree_packing to auto or off"
        )


@dataclass
@defaults_from("ppo_trainer", "actor_rollout_ref.actor")
class ActorConfig(UpdateBatchingConfig):
    """PPO policy update. ``loss_agg_mode: auto`` is ``seq-mean-token-sum-norm`` over the response
    budget for ``dr_grpo`` (set by the trainer's config), ``token-mean`` otherwise."""

    loss_scale_factor: float | None  # seq-mean-token-sum-norm's constant C; None: the response width T
    clip_ratio: float
    clip_ratio_low: float | None
    clip_ratio_high: float | None
    clip_ratio_c: float
    tis_cap: float | None  # truncated importance sampling on exp(old - rollout log-prob), capped; None: off
    reuse_on_policy_log_prob: (
        bool  # one optimiser step per batch: old log-probs = the update's own, detached (no extra pass)
    )
    entropy_coeff: float
    use_kl_loss: bool
    kl_loss_coef: float
    kl_loss_type: str
    grad_clip: float
    mixed_precision: str  # autocast dtype over fp32 master weights
    log_prob_micro_batch_size_per_gpu: int
    log_prob_max_token_len_per_gpu: int
    logit_chunk_tokens: int  # learned tokens per pass through the LM head (bounds the logits' memory)
    optim: OptimConfig

    def validate(self, where: str) -> None:
        _choice(self.loss_agg_mode, ("auto", *LOSS_AGG_MODES), f"{where}.loss_agg_mode")
        _choice(self.kl_loss_type, KL_ESTIMATORS, f"{where}.kl_loss_type")
        require(self.tis_cap is None or self.tis_cap > 0, f"{where}.tis_cap", "> 0 (or null: off)", self.tis_cap)
        _choice(self.mixed_precision, DTYPES, f"{where}.mixed_precision")
        require_counts(
            self,
            (
                "ppo_mini_batch_size",
                "ppo_micro_batch_size_per_gpu",
                "ppo_epochs",
                "log_prob_micro_batch_size_per_gpu",
                "logit_chunk_tokens",
            ),
            where,
        )


@dataclass
@defaults_from("ppo_trainer", "actor_rollout_ref.ref")
class RefConfig:
    """The frozen reference policy: fp32 weights like the actor's master copy; ``dtype`` is its autocast dtype.

    ``auto`` takes the actor's, so the reference runs the actor's exact log-prob
    path and the KL between identical weights is exactly 0.
    """

    dtype: str
    log_prob_micro_batch_size_per_gpu: int
    log_prob_max_token_len_per_gpu: int

    def validate(self, where: str) -> None:
        _choice(self.dtype, DTYPES, f"{where}.dtype")


@dataclass
@defaults_from("ppo_trainer", "actor_rollout_ref.rollout")
class RolloutConfig:
    """The generation engine and the run's sampling (`sampling`)."""

    name: str
    dtype: str
    temperature: float  # with top_p and top_k, the run's one sampling setting (`sampling`)
    top_p: float
    top_k: int  # -1: off
    response_length: int
    max_model_len: int
    enforce_eager: bool
    enable_prefix_caching: bool
    block_size: int | None  # KV cache block in tokens; None: 32 on CPU, the engine's default (16) on GPU
    kv_cache_gb: float  # the CPU engine's KV cache, exactly (fractions allowed)
    gpu_memory_utilization: float
    cpu_threads_bind: str
    in_process: bool
    weight_rounding: str  # fp32 weights into a bf16 engine: stochastic (unbiased) or nearest
    seed: int

    @property
    def sampling(self) -> Sampling:
        """``temperature``, ``top_p`` and ``top_k``: what every rollout of the run is handed."""
        return Sampling(self.temperature, self.top_p, self.top_k)

    def validate(self, where: str) -> None:
        _choice(self.name, ("vllm", "hf"), f"{where}.name")
        _choice(self.dtype, DTYPES, f"{where}.dtype")
        require(self.temperature >= 0, f"{where}.temperature", ">= 0 (0: greedy)", self.temperature)
        require(0 < self.top_p <= 1, f"{where}.top_p", "in (0, 1]", self.top_p)
        require(self.top_k == -1 or self.top_k >= 1, f"{where}.top_k", "-1 (off) or >= 1", self.top_k)
        _choice(self.weight_rounding, ("stochastic", "nearest"), f"{where}.weight_rounding")
        if not self.kv_cache_gb > 0:
            raise ConfigError(f"{where}.kv_cache_gb must be > 0 GiB (got {self.kv_cache_gb})")
        if self.block_size is not None and (
            not isinstance(self.block_size, int)
            or isinstance(self.block_size, bool)
            or self.block_size < 16
            or self.block_size % 16
        ):
            raise ConfigError(
                f"{where}.block_size must be a multiple of 16 tokens (or null: the device's default), "
                f"got {self.block_size!r}"
            )


@dataclass
@defaults_from("ppo_trainer", "actor_rollout_ref")
class ActorRolloutRefConfig:
    """What one ActorRolloutRefWorker rank holds."""

    model: ModelConfig
    actor: ActorConfig
    ref: RefConfig
    rollout: RolloutConfig
    device: str
    num_threads: int
    seed: int

    def validate(self, where: str) -> None:
        if not self.model.path:
            raise ConfigError(f"{where}.model.path is required")
        check_tree_packing(self.actor.tree_packing, self.model.attn_implementation, f"{where}.actor")


@dataclass
@defaults_from("ppo_trainer", "critic.model")
class CriticModelConfig:
    """The value model's weights and build: a full model, since LoRA (`ModelConfig.lora_rank`) trains the policy
    only."""

    path: str
    enable_gradient_checkpointing: bool
    attn_implementation: str


@dataclass
@defaults_from("ppo_trainer", "critic")
class CriticConfig(UpdateBatchingConfig):
    """The value model and its update."""

    enable: bool | None  # None: when the advantage estimator needs one
    model: CriticModelConfig
    optim: OptimConfig
    cliprange_value: float
    reuse_values_forward: bool  # one optimiser step per batch: the update backpropagates through the values pass
    grad_clip: float
    mixed_precision: str
    device: str
    num_threads: int
    seed: int

    def validate(self, where: str) -> None:
        _choice(self.mixed_precision, DTYPES, f"{where}.mixed_precision")
        _choice(self.loss_agg_mode, LOSS_AGG_MODES, f"{where}.loss_agg_mode")
        if not self.model.path:
            raise ConfigError(f"{where}.model.path is required")
        check_tree_packing(self.tree_packing, self.model.attn_implementation, where)


@dataclass
@defaults_from("ppo_trainer", "reward_model.model")
class ScoreModelConfig:
    """Where a reward model's weights come from (`verl.workers.reward_model`)."""

    path: str
    attn_implementation: str


@dataclass
@defaults_from("ppo_trainer", "reward_model.judge.serve")
class JudgeServeConfig:
    """The judge the run serves itself (`verl.workers.judge_server.JudgeServer`)."""

    model_path: str
    num_cpus: float
    num_gpus: float
    num_threads: int
    dtype: str
    kv_cache_gb: float
    max_model_len: int
    max_restarts: int
    hang_s: float

    def validate(self, where: str) -> None:
        _choice(self.dtype, DTYPES, f"{where}.dtype")


JUDGE_ANSWERS = ("yes_probability", "number")


@dataclass
@defaults_from("ppo_trainer", "reward_model.judge")
class JudgeConfig:
    """An LLM judge asked through the OpenAI chat API (`verl.trainer.ppo.judge`)."""

    base_url: str | None
    api_key_env: str | None
    model: str | None
    rubric: str | None
    answer: str
    max_tokens: int
    max_concurrency: int
    timeout_s: float
    retries: int
    max_failed_fraction: float
    serve: JudgeServeConfig

    def api_key(self) -> str | None:
        """The endpoint's key: the value of the environment variable ``api_key_env`` (None: no key sent)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def validate(self, where: str) -> None:
        _choice(self.answer, JUDGE_ANSWERS, f"{where}.answer")
        require_counts(self, ("max_tokens", "max_concurrency"), where)
        if not self.timeout_s > 0 or self.retries < 0:
            raise ConfigError(
                f"{where}.timeout_s must be > 0 and retries >= 0, got {self.timeout_s} and {self.retries}"
            )
        require(
            0.0 <= self.max_failed_fraction <= 1.0,
            f"{where}.max_failed_fraction",
            "in [0, 1]",
            self.max_failed_fraction,
        )


REWARD_KINDS = ("model", "judge")
REWARD_COMBINE = ("replace", "add")
REWARD_TRANSFORMS = ("sigmoid", "raw")


@dataclass
@defaults_from("ppo_trainer", "reward_model")
class RewardModelConfig:
    """A learned reward model or an LLM judge in the run: what scores,
    how the score becomes the reward, and its passes."""

    enable: bool
    kind: str
    model: ScoreModelConfig
    combine: str
    weight: float
    transform: str
    per_turn: bool
    dtype: str
    micro_batch_size_per_gpu: int
    use_dynamic_bsz: bool
    max_token_len_per_gpu: int
    tree_packing: str
    device: str
    num_threads: int
    judge: JudgeConfig

    @property
    def uses_model(self) -> bool:
        """A learned reward model scores the rollouts (a `RewardModelWorker` group)."""
        return self.enable and self.kind == "model"

    @property
    def uses_judge(self) -> bool:
        """An LLM judge scores the rollouts (`verl.trainer.ppo.judge`)."""
        return self.enable and self.kind == "judge"

    def validate(self, where: str) -> None:
        _choice(self.kind, REWARD_KINDS, f"{where}.kind")
        if self.kind == "judge" and self.per_turn:
            raise ConfigError(f"{where}.per_turn: the judge scores whole episodes; set per_turn=false with kind=judge")
        _choice(self.combine, REWARD_COMBINE, f"{where}.combine")
        _choice(self.transform, REWARD_TRANSFORMS, f"{where}.transform")
        _choice(self.dtype, DTYPES, f"{where}.dtype")
        check_tree_packing(self.tree_packing, self.model.attn_implementation, where)
        require_counts(self, ("micro_batch_size_per_gpu", "max_token_len_per_gpu"), where)


def resolve_policy_precision(cfg: ActorRolloutRefConfig) -> dict[str, Precision]:
    """The compute dtypes of the actor (autocast), the reference and the rollout engine, ``auto`` resolved."""
    actor = resolve_dtype(cfg.actor.mixed_precision, cfg.device, "train")
    if cfg.ref.dtype == "auto":
        ref = Precision(actor.dtype, "the actor's dtype, so both run one log-prob path")
    else:
        ref = resolve_dtype(cfg.ref.dtype, cfg.device, "infer")
    return {"actor": actor, "ref": ref, "rollout": resolve_dtype(cfg.rollout.dtype, cfg.device, "infer")}
