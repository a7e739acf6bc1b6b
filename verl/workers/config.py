"""Typed configs of the workers, built from plain dicts (or Hydra/OmegaConf) with strict checking.

`from_dict(Cls, data, where)` fills a dataclass recursively and raises
`ConfigError` for an unknown key (listing the known ones) or a value of the
wrong type, naming the full dotted path (e.g. ``actor_rollout_ref.actor.lr``).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from verl.trainer.ppo.core_algos import KL_ESTIMATORS, LOSS_AGG_MODES
from verl.utils.precision import DTYPE_CHOICES, Precision, resolve_dtype

T = TypeVar("T")


class ConfigError(ValueError):
    """A config value is unknown, missing or of the wrong type."""


def _check_type(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: expected {tp}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [_check_type(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return list(items) if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{where}: expected {tp.__name__}, got a bool ({value!r})")
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} ({value!r})")
    return value


def from_dict(cls: type[T], data: Any, where: str = "config") -> T:
    """Build dataclass ``cls`` from ``data`` (a dict, an OmegaConf node, or an instance of ``cls``)."""
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if hasattr(data, "items") and not isinstance(data, dict):  # OmegaConf DictConfig
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(data, resolve=True)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _check_type(data[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{name} is required")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate(where)
    return obj


def _choice(value: str, choices: tuple[str, ...], where: str) -> None:
    if value not in choices:
        raise ConfigError(f"{where} must be one of {list(choices)}, got {value!r}")


# every dtype key takes "auto" (chosen from the hardware, see verl.utils.precision) or an explicit dtype
DTYPES = DTYPE_CHOICES


LLAMA_LINEAR_LAYERS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class ModelConfig:
    """Where the weights come from and how the module is built.

    ``lora_rank`` > 0 trains low-rank adapters instead of the weights (`verl.utils.lora`): each linear
    layer named in ``target_modules`` computes ``x W^T + b + (lora_alpha / lora_rank) (x A^T) B^T`` with
    W, b frozen and only A (rank x in) and B (out x rank) trained; 0 trains every weight.
    """

    path: str = ""
    enable_gradient_checkpointing: bool = True
    attn_implementation: str = "sdpa"
    lora_rank: int = 0
    lora_alpha: float = 16.0
    target_modules: list[str] = field(default_factory=lambda: list(LLAMA_LINEAR_LAYERS))

    def validate(self, where: str) -> None:
        if self.lora_rank < 0:
            raise ConfigError(f"{where}.lora_rank must be >= 0 (0: full fine-tuning), got {self.lora_rank}")
        if self.lora_alpha <= 0:
            raise ConfigError(f"{where}.lora_alpha must be > 0, got {self.lora_alpha}")
        if self.lora_rank and not self.target_modules:
            raise ConfigError(f"{where}.target_modules is empty: LoRA (lora_rank={self.lora_rank}) needs at least one linear layer name")


@dataclass
class OptimConfig:
    """AdamW with linear warm-up, then a constant or cosine learning rate."""

    lr: float = 1e-6
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.01
    lr_warmup_steps: int = 0
    lr_scheduler: str = "constant"
    min_lr_ratio: float = 0.0
    total_training_steps: int = 3

    def validate(self, where: str) -> None:
        _choice(self.lr_scheduler, ("constant", "cosine"), f"{where}.lr_scheduler")
        if self.lr <= 0:
            raise ConfigError(f"{where}.lr must be > 0, got {self.lr}")


@dataclass
class UpdateBatchingConfig:
    """How a PPO update walks its rows and reduces its loss; shared by the actor and the critic (`TrainableModule.run_update`)."""

    ppo_mini_batch_size: int = 4
    ppo_micro_batch_size_per_gpu: int = 2
    use_dynamic_bsz: bool = True
    ppo_max_token_len_per_gpu: int = 3072
    ppo_epochs: int = 1
    shuffle: bool = True
    loss_agg_mode: str = "token-mean"
    loss_scale_factor: float | None = None  # seq-mean-token-sum-norm's constant C; None: the response width T


@dataclass
class ActorConfig(UpdateBatchingConfig):
    """PPO policy update. ``loss_agg_mode: auto`` is ``seq-mean-token-sum-norm`` over the response
    budget for ``dr_grpo`` (set by the trainer's config), ``token-mean`` otherwise."""

    loss_agg_mode: str = "auto"
    clip_ratio: float = 0.2
    clip_ratio_low: float | None = None
    clip_ratio_high: float | None = None
    clip_ratio_c: float = 3.0
    tis_cap: float | None = None  # truncated importance sampling on exp(old - rollout log-prob), capped; None: off
    reuse_on_policy_log_prob: bool = True  # one optimiser step per batch: old log-probs = the update's own, detached (no extra pass)
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    grad_clip: float = 1.0
    mixed_precision: str = "auto"  # autocast dtype over fp32 master weights
    log_prob_micro_batch_size_per_gpu: int = 4
    log_prob_max_token_len_per_gpu: int = 6144
    logit_chunk_tokens: int = 512  # learned tokens per pass through the LM head (bounds the logits' memory)
    optim: OptimConfig = field(default_factory=OptimConfig)

    def validate(self, where: str) -> None:
        _choice(self.loss_agg_mode, ("auto", *LOSS_AGG_MODES), f"{where}.loss_agg_mode")
        _choice(self.kl_loss_type, KL_ESTIMATORS, f"{where}.kl_loss_type")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ConfigError(f"{where}.tis_cap must be > 0 (or null: off), got {self.tis_cap}")
        _choice(self.mixed_precision, DTYPES, f"{where}.mixed_precision")
        for name in ("ppo_mini_batch_size", "ppo_micro_batch_size_per_gpu", "ppo_epochs", "log_prob_micro_batch_size_per_gpu", "logit_chunk_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{where}.{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class RefConfig:
    """The frozen reference policy: fp32 weights like the actor's master copy; ``dtype`` is its autocast dtype.

    ``auto`` takes the actor's, so the reference runs the actor's exact log-prob
    path and the KL between identical weights is exactly 0.
    """

    dtype: str = "auto"
    log_prob_micro_batch_size_per_gpu: int = 4
    log_prob_max_token_len_per_gpu: int = 6144

    def validate(self, where: str) -> None:
        _choice(self.dtype, DTYPES, f"{where}.dtype")


@dataclass
class RolloutConfig:
    """The generation engine and its default sampling parameters."""

    name: str = "vllm"
    dtype: str = "auto"
    temperature: float = 1.0  # drives the agent's sampling and the trainer's log-prob recomputation alike
    top_p: float = 1.0
    top_k: int = -1
    response_length: int = 96
    max_model_len: int = 4096
    enforce_eager: bool = True
    enable_prefix_caching: bool = True
    kv_cache_gb: float = 0.5  # the CPU engine's KV cache, exactly (fractions allowed)
    gpu_memory_utilization: float = 0.4
    cpu_threads_bind: str = "auto"
    in_process: bool = True
    seed: int = 1

    def validate(self, where: str) -> None:
        _choice(self.name, ("vllm", "hf"), f"{where}.name")
        _choice(self.dtype, DTYPES, f"{where}.dtype")
        if not self.kv_cache_gb > 0:
            raise ConfigError(f"{where}.kv_cache_gb must be > 0 GiB (got {self.kv_cache_gb})")


@dataclass
class ActorRolloutRefConfig:
    """What one ActorRolloutRefWorker rank holds."""

    model: ModelConfig = field(default_factory=ModelConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    ref: RefConfig = field(default_factory=RefConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    device: str = "cpu"
    num_threads: int = 2
    seed: int = 1

    def validate(self, where: str) -> None:
        if not self.model.path:
            raise ConfigError(f"{where}.model.path is required")


@dataclass
class CriticConfig(UpdateBatchingConfig):
    """The value model and its update."""

    enable: bool | None = None  # None: when the advantage estimator needs one
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-5))
    cliprange_value: float = 0.5
    grad_clip: float = 1.0
    mixed_precision: str = "auto"
    device: str = "cpu"
    num_threads: int = 2
    seed: int = 1

    def validate(self, where: str) -> None:
        _choice(self.mixed_precision, DTYPES, f"{where}.mixed_precision")
        _choice(self.loss_agg_mode, LOSS_AGG_MODES, f"{where}.loss_agg_mode")
        if not self.model.path:
            raise ConfigError(f"{where}.model.path is required")
        if self.model.lora_rank:
            raise ConfigError(f"{where}.model.lora_rank={self.model.lora_rank}: LoRA trains the policy only, the critic "
                              "stays a full model (its value head and backbone train in full); set it to 0")


def resolve_policy_precision(cfg: ActorRolloutRefConfig) -> dict[str, Precision]:
    """The compute dtypes of the actor (autocast), the reference and the rollout engine, ``auto`` resolved."""
    actor = resolve_dtype(cfg.actor.mixed_precision, cfg.device, "train")
    if cfg.ref.dtype == "auto":
        ref = Precision(actor.dtype, "the actor's dtype, so both run one log-prob path")
    else:
        ref = resolve_dtype(cfg.ref.dtype, cfg.device, "infer")
    return {"actor": actor, "ref": ref, "rollout": resolve_dtype(cfg.rollout.dtype, cfg.device, "infer")}
