"""The trainer's whole config: loaded from ``ppo_trainer.yaml`` with Hydra overrides, typed, and validated.

`load_config(overrides)` composes the YAML with command-line style overrides
(``key=value``, ``trainer.logger=[console,jsonl]``) and returns a `PPOConfig`.
Every check runs here, before any worker or server starts, and the first
problem is raised as one `ConfigError` naming the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from verl.trainer.ppo import core_algos
from verl.utils.precision import announce, resolve_dtype
from verl.workers.config import ActorRolloutRefConfig, ConfigError, CriticConfig, from_dict, resolve_policy_precision

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
GROUP_ESTIMATORS = ("grpo", "dr_grpo", "rloo", "gigpo")  # baselines from the other samples of the task (agent.n >= 2)


@dataclass
class DataConfig:
    train_files: str = "data/webshop/train.parquet"
    val_files: str = "data/webshop/dev.parquet"
    train_batch_size: int = 4
    val_batch_size: int = 8
    val_max_samples: int = 8
    shuffle: bool = True
    seed: int = 1
    rollout: str = "agent"  # agent: multi-turn episodes on env servers; single_turn: one generation per prompt, no env


@dataclass
class KLCtrlConfig:
    type: str = "fixed"
    kl_coef: float = 0.001
    target_kl: float = 0.1
    horizon: int = 10000


@dataclass
class GiGPOConfig:
    """GiGPO's options (`verl.trainer.ppo.gigpo`): per-step returns discounted over turns by ``step_gamma``
    (not GAE's token ``gamma``); ``A = A_episode + step_weight * A_step``; ``norm_by_std`` divides both
    levels by their group's std (on by default, as in the GiGPO paper: the step returns met at one state
    differ by a few discount factors, so centred alone ``A_step`` would be dwarfed by ``A_episode``);
    GiGPO ignores ``norm_adv_by_std_in_grpo``."""

    step_gamma: float = 0.95
    step_weight: float = 1.0
    norm_by_std: bool = True


@dataclass
class FilterGroupsConfig:
    """Dynamic sampling: drop groups whose scores are all equal and refill from the next prompts."""

    enable: bool = False
    max_rounds: int = 3  # extra rollouts per step at most


@dataclass
class AlgorithmConfig:
    adv_estimator: str = "gae"
    gamma: float = 1.0
    lam: float = 1.0
    norm_adv_by_std_in_grpo: bool = True
    use_kl_in_reward: bool = False
    kl_penalty: str = "kl"
    kl_ctrl: KLCtrlConfig = field(default_factory=KLCtrlConfig)
    reward_score_fn: str | None = None
    reward_allocation: str = "last_token"
    reward_timeout_s: float = 30.0
    gigpo: GiGPOConfig = field(default_factory=GiGPOConfig)
    filter_groups: FilterGroupsConfig = field(default_factory=FilterGroupsConfig)
    critic_warmup: int = 0


@dataclass
class TrainerConfig:
    project_name: str = "openmanus_rl"
    experiment_name: str = "webshop_ppo"
    device: str = "cpu"
    nnodes: int = 1
    n_workers_per_node: int = 1
    cpus_per_worker: float = 2.0
    threads_per_worker: int = 2
    total_training_steps: int = 3
    total_epochs: int = 100
    seed: int = 1
    balance_batch: bool = False
    val_before_train: bool = True
    val_do_sample: bool = False
    test_freq: int = 3
    save_freq: int = 3
    max_ckpt_to_keep: int = 2
    resume_mode: str = "auto"
    resume_from_path: str | None = None
    logger: list[str] = field(default_factory=lambda: ["console", "jsonl", "tensorboard"])
    output_dir: str = "outputs/webshop_ppo"
    default_local_dir: str = "outputs/webshop_ppo/checkpoints"
    save_trajectories: bool = True
    max_failed_fraction: float = 0.5  # above it a step is retried once, then the run stops (checkpointed)
    stop_after_step: int | None = None
    staleness: int = 0  # 0: synchronous; 1: one-step-off (the next rollout overlaps this step's training)


@dataclass
class RayInitConfig:
    address: str | None = None
    num_cpus: int | None = None
    include_dashboard: bool = False


@dataclass
class PPOConfig:
    data: DataConfig = field(default_factory=DataConfig)
    actor_rollout_ref: ActorRolloutRefConfig = field(default_factory=ActorRolloutRefConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    agent: dict[str, Any] = field(default_factory=dict)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    ray_init: RayInitConfig = field(default_factory=RayInitConfig)

    @property
    def use_critic(self) -> bool:
        needs = self.algorithm.adv_estimator in core_algos.ESTIMATORS_NEEDING_CRITIC
        return needs if self.critic.enable is None else self.critic.enable

    @property
    def use_ref(self) -> bool:
        return self.algorithm.use_kl_in_reward or self.actor_rollout_ref.actor.use_kl_loss

    @property
    def world_size(self) -> int:
        return self.trainer.nnodes * self.trainer.n_workers_per_node

    @property
    def response_budget(self) -> int:
        """The most response tokens a row may hold, as the rollout plugin (``data.rollout``) defines it."""
        from verl.trainer.ppo.rollout import load_rollout_plugin

        return load_rollout_plugin(self.data.rollout).response_budget(self)


def compose(overrides: list[str] | None = None):
    """The raw OmegaConf config: YAML defaults plus Hydra-syntax overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import ConfigCompositionException

    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return hydra_compose(config_name="ppo_trainer", overrides=list(overrides or []))
    except ConfigCompositionException as exc:
        cause = exc.__cause__ or exc
        raise ConfigError(f"bad override: {cause}") from None


def load_config(overrides: list[str] | None = None, check_files: bool = True) -> PPOConfig:
    """Compose, type-check and validate; raises `ConfigError` on the first problem."""
    raw = compose(overrides)
    try:
        container = OmegaConf.to_container(raw, resolve=True)
    except Exception as exc:  # interpolation errors name the key
        raise ConfigError(f"config interpolation failed: {exc}") from None
    cfg = from_dict(PPOConfig, container, "config")
    validate(cfg, check_files=check_files)
    return cfg


def validate(cfg: PPOConfig, check_files: bool = True) -> None:
    """Cross-field checks that a type check cannot see; then the rollout plugin checks its own section."""
    from verl.trainer.ppo.rollout import load_rollout_plugin

    t, a, alg = cfg.trainer, cfg.actor_rollout_ref.actor, cfg.algorithm
    if t.device not in ("cpu", "cuda"):
        raise ConfigError(f"trainer.device must be 'cpu' or 'cuda', got {t.device!r}")
    for name in ("nnodes", "n_workers_per_node", "total_training_steps", "threads_per_worker"):
        if getattr(t, name) < 1:
            raise ConfigError(f"trainer.{name} must be >= 1, got {getattr(t, name)}")
    plugin = load_rollout_plugin(cfg.data.rollout)  # first: loading it registers its reward functions
    if not 0.0 <= t.max_failed_fraction <= 1.0:
        raise ConfigError(f"trainer.max_failed_fraction must be in [0, 1], got {t.max_failed_fraction}")
    if t.staleness not in (0, 1):
        raise ConfigError(f"trainer.staleness must be 0 (synchronous) or 1 (one-step-off), got {t.staleness}: "
                          "one rollout engine per worker runs one rollout at a time, so a second step ahead would wait anyway")
    if t.staleness and a.tis_cap is None:
        raise ConfigError("trainer.staleness=1 trains on samples drawn by the weights of one update ago: set "
                          "actor_rollout_ref.actor.tis_cap (e.g. 2.0) so the loss corrects for it with truncated importance sampling")
    if t.staleness and alg.adv_estimator == "remax":
        raise ConfigError("trainer.staleness=1 cannot run with algorithm.adv_estimator=remax: its greedy baseline rollout "
                          "would share the engine with the overlapped rollout")
    if t.resume_mode not in ("auto", "disable", "resume_path"):
        raise ConfigError(f"trainer.resume_mode must be auto, disable or resume_path, got {t.resume_mode!r}")
    if t.resume_mode == "resume_path" and not t.resume_from_path:
        raise ConfigError("trainer.resume_mode=resume_path needs trainer.resume_from_path")
    from verl.utils.tracking import BACKENDS

    bad_loggers = [b for b in t.logger if b not in BACKENDS]
    if bad_loggers:
        raise ConfigError(f"trainer.logger has unknown backend(s) {bad_loggers}; known: {list(BACKENDS)}")
    if alg.adv_estimator not in core_algos.ADV_ESTIMATORS:
        raise ConfigError(f"algorithm.adv_estimator: unknown estimator '{alg.adv_estimator}'; known: {sorted(core_algos.ADV_ESTIMATORS)}")
    needs_critic = alg.adv_estimator in core_algos.ESTIMATORS_NEEDING_CRITIC
    if cfg.critic.enable is False and needs_critic:
        raise ConfigError(f"algorithm.adv_estimator={alg.adv_estimator} needs a critic, but critic.enable=false")
    if cfg.critic.enable is True and not needs_critic:
        raise ConfigError(f"critic.enable=true, but algorithm.adv_estimator={alg.adv_estimator} does not use a critic (its values would be ignored)")
    from verl.trainer.ppo.reward import ALLOCATIONS

    if alg.reward_allocation not in ALLOCATIONS:
        raise ConfigError(f"algorithm.reward_allocation must be one of {list(ALLOCATIONS)}, got {alg.reward_allocation!r}")
    if not 0 <= alg.gamma <= 1 or not 0 <= alg.gigpo.step_gamma <= 1:
        raise ConfigError(f"algorithm.gamma and algorithm.gigpo.step_gamma must be in [0, 1], got {alg.gamma} and {alg.gigpo.step_gamma}")
    if alg.filter_groups.enable and alg.adv_estimator not in GROUP_ESTIMATORS:
        raise ConfigError(f"algorithm.filter_groups drops groups whose samples would all get advantage 0, which only a group "
                          f"estimator ({', '.join(GROUP_ESTIMATORS)}) has; algorithm.adv_estimator={alg.adv_estimator}")
    if alg.filter_groups.max_rounds < 0:
        raise ConfigError(f"algorithm.filter_groups.max_rounds must be >= 0, got {alg.filter_groups.max_rounds}")
    if alg.reward_timeout_s <= 0:
        raise ConfigError(f"algorithm.reward_timeout_s must be > 0, got {alg.reward_timeout_s}")
    if alg.kl_penalty not in core_algos.KL_ESTIMATORS:
        raise ConfigError(f"algorithm.kl_penalty must be one of {list(core_algos.KL_ESTIMATORS)}, got {alg.kl_penalty!r}")
    if alg.kl_ctrl.type not in ("fixed", "adaptive"):
        raise ConfigError(f"algorithm.kl_ctrl.type must be fixed or adaptive, got {alg.kl_ctrl.type!r}")
    if alg.reward_score_fn is not None:
        from verl.utils.reward_score import SUPPORTED_REWARD_SCORE_FNS

        if alg.reward_score_fn not in SUPPORTED_REWARD_SCORE_FNS:
            raise ConfigError(f"algorithm.reward_score_fn: unknown '{alg.reward_score_fn}'; known: {sorted(SUPPORTED_REWARD_SCORE_FNS)}")

    try:
        plugin.validate(cfg)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"agent: {exc}") from None
    n = int(cfg.agent.get("n", 1))  # samples per task: the rollout's group size
    if alg.adv_estimator in GROUP_ESTIMATORS and n < 2:
        raise ConfigError(f"algorithm.adv_estimator={alg.adv_estimator} compares samples of one task: set agent.n >= 2 (got {n})")
    if alg.adv_estimator == "gigpo" and int(cfg.agent.get("history_window", 0)) < 1:
        raise ConfigError("algorithm.adv_estimator=gigpo needs the rollout's step-wise mode (one row per turn): set agent.history_window >= 1")
    if a.loss_agg_mode == "auto":
        a.loss_agg_mode = "seq-mean-token-sum-norm" if alg.adv_estimator == "dr_grpo" else "token-mean"
    if a.loss_agg_mode == "seq-mean-token-sum-norm" and a.loss_scale_factor is None:
        a.loss_scale_factor = float(cfg.response_budget)  # Dr. GRPO's constant: the configured response budget

    trajectories = cfg.data.train_batch_size * n
    ws = cfg.world_size
    for group, mini in (("actor_rollout_ref.actor", a.ppo_mini_batch_size), ("critic", cfg.critic.ppo_mini_batch_size)):
        if group == "critic" and not cfg.use_critic:
            continue
        if trajectories % mini:
            raise ConfigError(
                f"{group}.ppo_mini_batch_size={mini} must divide the trajectories per step "
                f"(data.train_batch_size {cfg.data.train_batch_size} x agent.n {n} = {trajectories})"
            )
        if mini % ws:
            raise ConfigError(f"{group}.ppo_mini_batch_size={mini} must divide over the {ws} worker ranks")
    if trajectories % ws:
        raise ConfigError(f"trajectories per step ({trajectories}) must divide over the {ws} worker ranks")

    if check_files:
        model = cfg.actor_rollout_ref.model.path
        if not model or not (Path(model) / "config.json").is_file():
            raise ConfigError(f"actor_rollout_ref.model.path={model!r} is not a Hugging Face model folder (no config.json); run scripts/prepare_model.py")
        if cfg.actor_rollout_ref.model.lora_rank:
            from verl.utils.lora import check_target_modules

            check_target_modules(model, cfg.actor_rollout_ref.model.target_modules, "actor_rollout_ref.model")
        for key, path in (("data.train_files", cfg.data.train_files), ("data.val_files", cfg.data.val_files)):
            if not Path(path).is_file():
                raise ConfigError(f"{key}={path!r} does not exist; run scripts/prepare_data.py")
        for key, path in (("trainer.output_dir", t.output_dir), ("trainer.default_local_dir", t.default_local_dir)):
            _check_writable_dir(key, path)


def _check_writable_dir(key: str, path: str) -> None:
    """``path`` is a directory this user can create (or write into), checked without creating anything."""
    existing = Path(path).absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{key}={path!r} cannot be created: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}={path!r} is not writable: {existing} does not allow this user to write")


def resolve_precision(cfg: PPOConfig, cuda_available: bool | None = None) -> dict[str, dict[str, str]]:
    """Replace every ``auto`` dtype in ``cfg`` with the hardware's choice, print each choice once, and return them.

    The result (``{role: {"dtype", "reason"}}``) goes into ``config.json``. On
    ``trainer.device=cuda`` with no GPU in this (driver) process, ``auto`` is
    left for each worker to resolve on its own GPU.
    """
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available()
    if cfg.trainer.device == "cuda" and not cuda_available:
        return {role: {"dtype": "auto", "reason": "resolved by each worker on its GPU"} for role in ("actor", "ref", "rollout", "critic")}
    arr = cfg.actor_rollout_ref
    chosen = resolve_policy_precision(arr)
    arr.actor.mixed_precision, arr.ref.dtype, arr.rollout.dtype = chosen["actor"].dtype, chosen["ref"].dtype, chosen["rollout"].dtype
    if cfg.use_critic:
        chosen["critic"] = resolve_dtype(cfg.critic.mixed_precision, cfg.critic.device, "train")
        cfg.critic.mixed_precision = chosen["critic"].dtype
    if not cfg.use_ref:
        del chosen["ref"]
    for role, precision in chosen.items():
        announce(role, precision)
    return {role: {"dtype": p.dtype, "reason": p.reason} for role, p in chosen.items()}
