"""The trainer's whole config: loaded from ``ppo_trainer.yaml`` with Hydra overrides, typed, and validated.

`load_config(overrides)` composes the YAML with command-line style overrides
(``key=value``, ``trainer.logger=[console,jsonl]``) and returns a `PPOConfig`.
Every check runs here, before any worker or server starts, and the first
problem is raised as one `ConfigError` naming the key. The dataclasses hold
the types; their defaults are the YAML's values (`defaults_from`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from verl import core_algos
from verl.utils.node_labels import is_label_selector
from verl.utils.precision import announce, resolve_dtype
from verl.utils.typed_config import ConfigError, defaults_from, load_yaml_config, require, require_counts
from verl.workers.config import ActorRolloutRefConfig, CriticConfig, RewardModelConfig, resolve_policy_precision


@dataclass
@defaults_from("ppo_trainer", "data")
class DataConfig:
    train_files: str
    val_files: str
    train_batch_size: int
    val_batch_size: int
    val_max_samples: int
    shuffle: bool
    seed: int
    rollout: str  # agent: multi-turn episodes on env servers; single_turn: one generation per prompt, no env


@dataclass
@defaults_from("ppo_trainer", "algorithm.kl_ctrl")
class KLCtrlConfig:
    type: str
    kl_coef: float
    target_kl: float
    horizon: int


@dataclass
@defaults_from("ppo_trainer", "algorithm.filter_groups")
class FilterGroupsConfig:
    """Dynamic sampling: drop groups whose scores are all equal and refill from the next prompts."""

    enable: bool
    max_rounds: int  # extra rollouts per step at most


@dataclass
@defaults_from("ppo_trainer", "algorithm")
class AlgorithmConfig:
    adv_estimator: str
    gamma: float
    lam: float
    norm_adv_by_std_in_grpo: bool
    use_kl_in_reward: bool
    kl_penalty: str
    kl_ctrl: KLCtrlConfig
    reward_score_fn: str | None
    reward_allocation: str
    reward_timeout_s: float
    filter_groups: FilterGroupsConfig
    critic_warmup: int
    # the sections of estimators' own options, algorithm.<name> (e.g. algorithm.gigpo), typed by their
    # registration (`core_algos.Estimator.options`): `typed_config.from_dict` fills them through section_type
    sections = MappingProxyType({})

    @staticmethod
    def section_type(key: str) -> type | None:
        """The options class of the estimator registered as ``key``, if it has one."""
        estimator = core_algos.ESTIMATORS.get(key)
        return estimator.options if estimator is not None else None

    def options(self, name: str | None = None) -> Any:
        """Estimator ``name``'s options (default: the chosen one's): its section as the config gave it, else
        its options class's defaults; None for an estimator without options."""
        name = name or self.adv_estimator
        options = core_algos.get_estimator(name).options
        if options is None:
            return None
        return self.sections.get(name) or options()


@dataclass
@defaults_from("ppo_trainer", "trainer")
class TrainerConfig:
    project_name: str
    experiment_name: str
    device: str
    nnodes: int
    n_workers_per_node: int
    policy_nodes: dict[str, str] | None  # Ray node labels every policy node carries; None: any node
    cpus_per_worker: float
    threads_per_worker: int
    total_training_steps: int
    seed: int
    balance_batch: bool
    val_before_train: bool
    val_do_sample: bool
    test_freq: int
    save_freq: int
    max_ckpt_to_keep: int
    keep_best: bool  # keep the checkpoint of the best validation success beside the newest ones (checkpoint.BEST_FILE)
    resume_mode: str
    resume_from_path: str | None
    logger: list[str]
    output_dir: str
    default_local_dir: str
    save_trajectories: bool
    journal: bool  # journal each step's rollout beside the checkpoints; a resumed step replays it
    max_failed_fraction: float  # above it a step is retried once, then the run stops (checkpointed)
    stop_after_step: int | None
    max_minutes: (
        float | None
    )  # RL wall-clock budget of this run (from fit's start); the step ending past it is the last
    staleness: int  # 0: synchronous; 1: one-step-off (the next rollout overlaps this step's training)


@dataclass
@defaults_from("ppo_trainer", "ray_init")
class RayInitConfig:
    address: str | None
    num_cpus: int | None
    include_dashboard: bool


@dataclass
@defaults_from("ppo_trainer")
class PPOConfig:
    data: DataConfig
    actor_rollout_ref: ActorRolloutRefConfig
    critic: CriticConfig
    reward_model: RewardModelConfig
    algorithm: AlgorithmConfig
    agent: dict[str, Any]  # typed by the rollout plugin (`data.rollout`)
    trainer: TrainerConfig
    ray_init: RayInitConfig

    @property
    def use_critic(self) -> bool:
        needs = core_algos.get_estimator(self.algorithm.adv_estimator).needs_critic
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


def load_config(overrides: list[str] | None = None, check_files: bool = True) -> PPOConfig:
    """Compose ``ppo_trainer.yaml`` with the overrides, type-check, validate, then fill in the values derived
    from others (`derive`); raises `ConfigError` on the first problem. An estimator or a reward module named
    as ``package.module:name`` (``algorithm.adv_estimator``, ``algorithm.reward_score_fn``) is imported first (so
    an estimator's options section can be typed) and the run knows it as ``name``."""
    overrides = [_import_override(item) for item in overrides or []]
    cfg = load_yaml_config(PPOConfig, "ppo_trainer", overrides, "config")
    validate(cfg, check_files=check_files)
    derive(cfg)
    return cfg


def _import_override(item: str) -> str:
    """``algorithm.adv_estimator=package.module:name`` or ``algorithm.reward_score_fn=package.module:name`` ->
    ``...=name``, its module imported (it registers ``name``)."""
    from verl.utils.reward_score import load_reward_score

    loaders = {"algorithm.adv_estimator": core_algos.load_estimator, "algorithm.reward_score_fn": load_reward_score}
    key, _, value = item.partition("=")
    loader = loaders.get(key.lstrip("+"))
    if loader is None or ":" not in value:
        return item
    try:
        return f"{key}={loader(value)}"
    except ValueError as exc:
        raise ConfigError(f"{key.lstrip('+')}: {exc}") from None


def derive(cfg: PPOConfig) -> None:
    """Resolve the settings whose default depends on others: ``actor.loss_agg_mode: auto`` becomes the estimator's
    own (`core_algos.Estimator.loss_agg_mode`),
    and seq-mean-token-sum-norm's constant defaults to the response budget."""
    a = cfg.actor_rollout_ref.actor
    if a.loss_agg_mode == "auto":
        a.loss_agg_mode = core_algos.get_estimator(cfg.algorithm.adv_estimator).loss_agg_mode
    if a.loss_agg_mode == "seq-mean-token-sum-norm" and a.loss_scale_factor is None:
        a.loss_scale_factor = float(cfg.response_budget)  # Dr. GRPO's constant: the configured response budget


def validate(cfg: PPOConfig, check_files: bool = True) -> None:
    """Cross-field checks that a type check cannot see, then the rollout plugin's checks of its own section;
    reads ``cfg`` and changes nothing."""
    from verl.trainer.ppo.rollout import load_rollout_plugin

    t, a, alg = cfg.trainer, cfg.actor_rollout_ref.actor, cfg.algorithm
    if t.device not in ("cpu", "cuda"):
        raise ConfigError(f"trainer.device must be 'cpu' or 'cuda', got {t.device!r}")
    require_counts(t, ("nnodes", "n_workers_per_node", "total_training_steps", "threads_per_worker"), "trainer")
    plugin = load_rollout_plugin(cfg.data.rollout)  # first: loading it registers its reward functions
    require(0.0 <= t.max_failed_fraction <= 1.0, "trainer.max_failed_fraction", "in [0, 1]", t.max_failed_fraction)
    if not is_label_selector(t.policy_nodes):
        raise ConfigError(
            f"trainer.policy_nodes maps Ray node label names to string values (quote them), got {t.policy_nodes}"
        )
    require(
        t.max_minutes is None or t.max_minutes > 0,
        "trainer.max_minutes",
        "> 0 (or null: no time budget)",
        t.max_minutes,
    )
    if t.keep_best and t.test_freq < 1:
        raise ConfigError(
            "trainer.keep_best keeps the checkpoint of the best validation: it needs trainer.test_freq >= 1"
        )
    if t.staleness not in (0, 1):
        raise ConfigError(
            f"trainer.staleness must be 0 (synchronous) or 1 (one-step-off), got {t.staleness}: "
            "one rollout engine per worker runs one rollout at a time, so a second step ahead would wait anyway"
        )
    if t.staleness and a.tis_cap is None:
        raise ConfigError(
            "trainer.staleness=1 trains on samples drawn by the weights of one update ago: set "
            "actor_rollout_ref.actor.tis_cap (e.g. 2.0) so the loss corrects for it with truncated importance sampling"
        )
    if t.resume_mode not in ("auto", "disable", "resume_path"):
        raise ConfigError(f"trainer.resume_mode must be auto, disable or resume_path, got {t.resume_mode!r}")
    if t.resume_mode == "resume_path" and not t.resume_from_path:
        raise ConfigError("trainer.resume_mode=resume_path needs trainer.resume_from_path")
    from verl.utils.tracking import BACKENDS

    bad_loggers = [b for b in t.logger if b not in BACKENDS]
    if bad_loggers:
        raise ConfigError(f"trainer.logger has unknown backend(s) {bad_loggers}; known: {list(BACKENDS)}")
    if alg.adv_estimator not in core_algos.ESTIMATORS:
        raise ConfigError(
            f"algorithm.adv_estimator: unknown estimator '{alg.adv_estimator}'; known: {sorted(core_algos.ESTIMATORS)}"
        )
    estimator = core_algos.get_estimator(alg.adv_estimator)
    needs_critic = estimator.needs_critic
    if cfg.critic.enable is False and needs_critic:
        raise ConfigError(f"algorithm.adv_estimator={alg.adv_estimator} needs a critic, but critic.enable=false")
    if cfg.critic.enable is True and not needs_critic:
        raise ConfigError(
            f"critic.enable=true, but algorithm.adv_estimator={alg.adv_estimator} does not use a critic "
            "(its values would be ignored)"
        )
    from verl.trainer.ppo.reward import ALLOCATIONS

    if alg.reward_allocation not in ALLOCATIONS:
        raise ConfigError(
            f"algorithm.reward_allocation must be one of {list(ALLOCATIONS)}, got {alg.reward_allocation!r}"
        )
    require(0 <= alg.gamma <= 1, "algorithm.gamma", "in [0, 1]", alg.gamma)
    if alg.filter_groups.enable and not estimator.group_baseline:
        raise ConfigError(
            f"algorithm.filter_groups drops groups whose samples would all get advantage 0, which only a group "
            f"estimator ({', '.join(core_algos.group_estimators())}) has; algorithm.adv_estimator={alg.adv_estimator}"
        )
    require(
        alg.filter_groups.max_rounds >= 0, "algorithm.filter_groups.max_rounds", ">= 0", alg.filter_groups.max_rounds
    )
    require(alg.reward_timeout_s > 0, "algorithm.reward_timeout_s", "> 0", alg.reward_timeout_s)
    if alg.kl_penalty not in core_algos.KL_ESTIMATORS:
        raise ConfigError(
            f"algorithm.kl_penalty must be one of {list(core_algos.KL_ESTIMATORS)}, got {alg.kl_penalty!r}"
        )
    if alg.kl_ctrl.type not in ("fixed", "adaptive"):
        raise ConfigError(f"algorithm.kl_ctrl.type must be fixed or adaptive, got {alg.kl_ctrl.type!r}")
    if alg.reward_score_fn is not None:
        from verl.utils.reward_score import SUPPORTED_REWARD_SCORE_FNS

        if alg.reward_score_fn not in SUPPORTED_REWARD_SCORE_FNS:
            raise ConfigError(
                f"algorithm.reward_score_fn: unknown '{alg.reward_score_fn}'; known: "
                f"{sorted(SUPPORTED_REWARD_SCORE_FNS)}"
            )

    rm = cfg.reward_model
    if rm.enable and int(cfg.agent.get("history_window", 0) or 0) > 0:
        raise ConfigError(
            "reward_model.enable scores whole trajectories; step-wise rows (agent.history_window > 0) are not "
            "supported with it: set agent.history_window=0"
        )

    try:
        plugin.validate(cfg)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"agent: {exc}") from None
    n = int(cfg.agent.get("n", 1))  # samples per task: the rollout's group size
    if estimator.group_baseline and n < 2:
        raise ConfigError(
            f"algorithm.adv_estimator={alg.adv_estimator} compares samples of one task: set agent.n >= 2 (got {n})"
        )
    if estimator.greedy_baseline and t.staleness:
        raise ConfigError(
            f"trainer.staleness=1 cannot run with algorithm.adv_estimator={alg.adv_estimator}: its greedy baseline "
            "rollout would share the engine with the overlapped rollout"
        )
    if estimator.check is not None and (problem := estimator.check(cfg)):
        raise ConfigError(problem)

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
            raise ConfigError(
                f"actor_rollout_ref.model.path={model!r} is not a Hugging Face model folder (no config.json); "
                "run scripts/prepare_model.py"
            )
        if cfg.actor_rollout_ref.model.lora_rank:
            from verl.utils.lora import check_target_modules

            check_target_modules(model, cfg.actor_rollout_ref.model.target_modules, "actor_rollout_ref.model")
        if rm.uses_model:
            from verl.workers.reward_model import reward_model_problem

            if problem := reward_model_problem(rm.model.path):
                raise ConfigError(f"reward_model.model.path: {problem}")
        if rm.uses_judge:
            _check_judge(rm.judge)
        for key, path in (("data.train_files", cfg.data.train_files), ("data.val_files", cfg.data.val_files)):
            if not Path(path).is_file():
                raise ConfigError(f"{key}={path!r} does not exist; run scripts/prepare_data.py")
        for key, path in (("trainer.output_dir", t.output_dir), ("trainer.default_local_dir", t.default_local_dir)):
            _check_writable_dir(key, path)


def _check_judge(judge) -> None:
    """The rubric has its placeholder; a served judge's model is a folder; an external endpoint answers."""
    from verl.trainer.ppo.judge import JudgeError, endpoint_model, load_rubric

    try:
        load_rubric(judge.rubric)
    except ValueError as exc:
        raise ConfigError(f"reward_model.judge.rubric: {exc}") from None
    if judge.base_url is None:
        if not (Path(judge.serve.model_path) / "config.json").is_file():
            raise ConfigError(
                f"reward_model.judge.serve.model_path={judge.serve.model_path!r} is not a Hugging Face model "
                "folder (no config.json): name the judge model the run serves, or set reward_model.judge.base_url"
            )
        return
    if judge.api_key_env and judge.api_key_env not in os.environ:
        raise ConfigError(f"reward_model.judge.api_key_env={judge.api_key_env!r}: that environment variable is not set")
    try:
        endpoint_model(judge.base_url, judge.api_key(), min(judge.timeout_s, 10.0))
    except JudgeError as exc:
        raise ConfigError(f"reward_model.judge.base_url: {exc}") from None


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
        return {
            role: {"dtype": "auto", "reason": "resolved by each worker on its GPU"}
            for role in ("actor", "ref", "rollout", "critic", "reward_model")
        }
    arr = cfg.actor_rollout_ref
    chosen = resolve_policy_precision(arr)
    arr.actor.mixed_precision, arr.ref.dtype, arr.rollout.dtype = (
        chosen["actor"].dtype,
        chosen["ref"].dtype,
        chosen["rollout"].dtype,
    )
    if cfg.use_critic:
        chosen["critic"] = resolve_dtype(cfg.critic.mixed_precision, cfg.critic.device, "train")
        cfg.critic.mixed_precision = chosen["critic"].dtype
    if cfg.reward_model.uses_model:
        chosen["reward_model"] = resolve_dtype(cfg.reward_model.dtype, cfg.reward_model.device, "infer")
        cfg.reward_model.dtype = chosen["reward_model"].dtype
    if not cfg.use_ref:
        del chosen["ref"]
    for role, precision in chosen.items():
        announce(role, precision)
    return {role: {"dtype": p.dtype, "reason": p.reason} for role, p in chosen.items()}
