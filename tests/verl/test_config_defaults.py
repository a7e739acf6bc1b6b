"""One source of defaults: the YAML files under `verl/trainer/config/`.

Every YAML key maps to a dataclass field and every field to a key; every dataclass default is the YAML's
value (the dataclasses write none of their own); the command-line tools' shared flags default to the YAML.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from script_modules import load_script

from openmanus_rl.agent import AgentConfig
from verl import core_algos
from verl.trainer.ppo.config import PPOConfig, load_config
from verl.trainer.rm_trainer import RMConfig
from verl.trainer.sft_trainer import SFTConfig
from verl.utils import yaml_defaults
from verl.utils.typed_config import ConfigError, config_fields, defaults_from, from_dict, handed
from verl.utils.yaml_defaults import CONFIG_DIR, compose, yaml_value
from verl.workers.config import CriticConfig, ModelConfig, OptimConfig

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"ppo_trainer": PPOConfig, "sft_trainer": SFTConfig, "rm_trainer": RMConfig}
TYPED_SECTIONS = {("ppo_trainer", "agent"): AgentConfig}  # sections a root types as a plain dict


def drift(defaults: Any, yaml: dict, config: str, path: str = "") -> list[str]:
    """Every key whose dataclass default differs from the resolved YAML value, or that only one side has."""
    found = []
    names = {f.name for f in config_fields(defaults)}
    for key in sorted(names | set(yaml)):
        where = f"{path}{key}"
        section = getattr(type(defaults), "section_type", lambda key: None)(key) if key not in names else None
        if section is not None:  # a registry-typed section (an estimator's options): its defaults are its class's
            found += drift(section(), yaml[key], config, where + ".") if key in yaml else []
            continue
        if key not in yaml or key not in names:
            found.append(f"{where}: only in the {'dataclass' if key in names else 'YAML'}")
            continue
        value = getattr(defaults, key)
        typed = TYPED_SECTIONS.get((config, where))
        if dataclasses.is_dataclass(value) or typed:
            found += drift(value if typed is None else typed(), yaml[key], config, where + ".")
        elif value != yaml[key]:
            found.append(f"{where}: dataclass {value!r}, YAML {yaml[key]!r}")
    return found


def config_classes(cls: type, seen: dict[str, type]) -> dict[str, type]:
    """``cls`` and every config dataclass its fields hold, by name."""
    seen[cls.__name__] = cls
    sections = [est.options for name, est in core_algos.ESTIMATORS.items() if getattr(cls, "section_type", None)]
    for tp in [*typing.get_type_hints(cls).values(), *filter(None, sections)]:
        if dataclasses.is_dataclass(tp) and tp.__name__ not in seen:
            config_classes(tp, seen)
    return seen


# ----------------------------------------------------------------------------- the dataclasses
def test_every_config_file_has_its_dataclass():
    assert sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")) == sorted(ROOTS)


@pytest.mark.parametrize("config", sorted(ROOTS))
def test_dataclass_keys_and_defaults_match_the_yaml(config):
    assert drift(ROOTS[config](), yaml_value(config), config) == []
    assert OmegaConf.to_container(compose(config), resolve=True) == yaml_value(config)  # as the entry points load it


@pytest.mark.parametrize(
    "config, overrides, expected",
    [
        (
            "ppo_trainer",
            ["actor_rollout_ref.actor.clip_ratio=0.3", "+agent.extra=1", "+trainer.extra=1"],
            [
                "actor_rollout_ref.actor.clip_ratio: dataclass 0.2, YAML 0.3",
                "agent.extra: only in the YAML",
                "trainer.extra: only in the YAML",
            ],
        ),
        (
            "sft_trainer",
            ["optim.lr=1e-5", "+train.extra=1"],
            ["optim.lr: dataclass 0.0001, YAML 1e-05", "train.extra: only in the YAML"],
        ),
    ],
)
def test_the_drift_check_sees_a_changed_default_and_a_new_key(config, overrides, expected):
    yaml = OmegaConf.to_container(compose(config, overrides), resolve=True)
    assert drift(ROOTS[config](), yaml, config) == expected


def test_each_config_dataclass_takes_its_defaults_from_its_yaml_section():
    classes = {}
    for cls in (*ROOTS.values(), AgentConfig):
        config_classes(cls, classes)
    assert sorted(classes) == [
        "ActorConfig",
        "ActorRolloutRefConfig",
        "AgentConfig",
        "AlgorithmConfig",
        "CriticConfig",
        "CriticModelConfig",
        "DataConfig",
        "FilterGroupsConfig",
        "GiGPOOptions",
        "JudgeConfig",
        "JudgeServeConfig",
        "KLCtrlConfig",
        "ModelConfig",
        "OptimConfig",
        "PPOConfig",
        "RMConfig",
        "RMDataConfig",
        "RMModelConfig",
        "RMTrainConfig",
        "RayInitConfig",
        "RefConfig",
        "RewardModelConfig",
        "RolloutConfig",
        "RunConfig",
        "SFTConfig",
        "SFTDataConfig",
        "SFTTrainConfig",
        "ScoreModelConfig",
        "TrainerConfig",
    ]
    for name, cls in classes.items():
        assert cls() == from_dict(cls, yaml_value(*cls._yaml_source), name, validate=False), name
    assert AgentConfig._yaml_source == ("ppo_trainer", "agent")


def test_sft_runs_with_the_yaml_values():
    """What ``main_sft`` (and so the warm start) runs with when nothing is overridden."""
    cfg = SFTConfig()
    assert (cfg.data.train_files, cfg.data.val_files, cfg.data.max_length) == (
        "data/sft/webshop_react_train.parquet",
        "data/sft/webshop_react_dev.parquet",
        3072,
    )
    assert (
        cfg.optim.lr,
        cfg.optim.weight_decay,
        cfg.optim.lr_warmup_steps,
        cfg.optim.lr_scheduler,
        cfg.optim.min_lr_ratio,
        cfg.optim.total_training_steps,
    ) == (1e-4, 0.0, 2, "cosine", 0.1, 1)
    assert (
        cfg.train.batch_size,
        cfg.train.micro_batch_size,
        cfg.train.max_token_len,
        cfg.train.epochs,
        cfg.train.seed,
    ) == (4, 4, 4096, 2, 0)
    assert (cfg.trainer.experiment_name, cfg.trainer.output_dir, cfg.trainer.logger) == (
        "sft",
        "outputs/sft",
        ["console", "jsonl"],
    )


def test_a_shared_class_nested_in_another_section_takes_that_sections_values():
    assert PPOConfig().actor_rollout_ref.actor.optim.lr == 1e-6
    assert PPOConfig().critic.optim.lr == 1e-5
    assert SFTConfig().optim.lr == 1e-4
    assert SFTConfig().optim is not SFTConfig().optim and PPOConfig().agent is not PPOConfig().agent  # fresh copies
    assert type(PPOConfig().trainer.cpus_per_worker) is float  # typed as the field says (the YAML writes 2)


def test_a_section_given_in_part_keeps_its_own_sections_values_for_the_rest():
    """A dict that names some keys of a nested section takes the rest from that section's YAML, not from the
    nested class's own (the policy's) defaults: one place, one default."""
    critic = from_dict(CriticConfig, {"model": {"path": "m"}, "optim": {"total_training_steps": 3}}, "critic")
    assert (critic.model.path, critic.model.enable_gradient_checkpointing) == ("m", True)  # critic.model's
    assert (critic.optim.lr, critic.optim.total_training_steps) == (1e-5, 3)  # critic.optim's lr
    assert ModelConfig().enable_gradient_checkpointing is False and OptimConfig().lr == 1e-6  # the policy's
    given = {"critic": {"optim": {"lr": 2e-5}}, "actor_rollout_ref": {"actor": {"clip_ratio": 0.3}}}
    ppo = from_dict(PPOConfig, given, "config", validate=False)
    assert (ppo.critic.optim.lr, ppo.critic.model.enable_gradient_checkpointing) == (2e-5, True)
    assert (ppo.actor_rollout_ref.actor.clip_ratio, ppo.actor_rollout_ref.actor.optim.lr) == (0.3, 1e-6)


KL_FIELDS = {"type": str, "kl_coef": float, "target_kl": float, "horizon": int}  # ppo_trainer.yaml algorithm.kl_ctrl


@pytest.mark.parametrize(
    "fields, defaults, message",
    [
        (
            KL_FIELDS,
            {"kl_coef": 0.5},
            "KL writes its own default for ['kl_coef']: defaults live in ppo_trainer.yaml algorithm.kl_ctrl",
        ),
        (
            {**{k: v for k, v in KL_FIELDS.items() if k != "horizon"}, "warmup": int},
            {},
            "KL and ppo_trainer.yaml algorithm.kl_ctrl disagree: fields only in the class ['warmup'], keys only in "
            "the YAML ['horizon']",
        ),
        (
            {**KL_FIELDS, "horizon": str},
            {},
            "ppo_trainer.yaml algorithm.kl_ctrl.horizon: expected str, got int (10000)",
        ),
    ],
    ids=["default-in-python", "field-and-key-missing", "wrong-type"],
)
def test_defaults_from_refuses_a_class_that_disagrees_with_its_yaml(fields, defaults, message):
    """As ``@dataclass @defaults_from("ppo_trainer", "algorithm.kl_ctrl") class KL: ...`` with these fields."""
    written = type("KL", (), {"__annotations__": dict(fields), "__module__": __name__, **defaults})
    with pytest.raises(ConfigError) as err:
        dataclass(defaults_from("ppo_trainer", "algorithm.kl_ctrl")(written))
    assert str(err.value) == message


def test_a_handed_field_is_no_yaml_key():
    """`handed`: `defaults_from` matches the section without it, `from_dict` refuses it as a key and leaves it at its
    default, and the builder hands the value in."""
    written = type(
        "KL",
        (),
        {"__annotations__": {**KL_FIELDS, "note": str | None}, "__module__": __name__, "note": handed(default=None)},
    )
    KL = dataclass(defaults_from("ppo_trainer", "algorithm.kl_ctrl")(written))
    assert KL().note is None and KL(note="given").note == "given"
    assert [f.name for f in config_fields(KL)] == list(KL_FIELDS)
    assert from_dict(KL, {"kl_coef": 0.5}, "kl") == KL(kl_coef=0.5)
    with pytest.raises(
        ConfigError,
        match=r"^kl: unknown key\(s\) \['note'\]; known keys: \['horizon', 'kl_coef', 'target_kl', 'type'\]$",
    ):
        from_dict(KL, {"note": "x"}, "kl")


def test_yaml_value_reads_by_dotted_key():
    assert yaml_value("ppo_trainer", "agent.max_response_length") == 96
    assert yaml_value("ppo_trainer", "actor_rollout_ref.rollout.response_length") == 96  # interpolation resolved
    assert yaml_value("sft_trainer", "trainer.output_dir") == "outputs/sft"
    with pytest.raises(KeyError, match="ppo_trainer.yaml has no key 'agent.nope'"):
        yaml_value("ppo_trainer", "agent.nope")


def test_gigpo_has_its_own_std_switch_on_by_default():
    assert yaml_value("ppo_trainer", "algorithm.gigpo") == {"step_gamma": 0.95, "step_weight": 1.0, "norm_by_std": True}
    yaml = OmegaConf.to_container(
        compose("ppo_trainer", ["algorithm.gigpo.norm_by_std=false", "actor_rollout_ref.model.path=m"]), resolve=True
    )
    alg = from_dict(PPOConfig, yaml, "config").algorithm
    assert (alg.options("gigpo").norm_by_std, alg.norm_adv_by_std_in_grpo) == (False, True)


# ----------------------------------------------------------------------------- the command-line tools
EVAL_FLAGS = {  # flag: (ppo_trainer.yaml key, its value today)
    "env_name": ("agent.env_name", "webshop"),
    "temperature": ("actor_rollout_ref.rollout.temperature", 1.0),
    "max_turns": ("agent.max_turns", None),
    "max_prompt_length": ("agent.max_prompt_length", 1024),
    "max_response_length": ("agent.max_response_length", 96),
    "max_obs_length": ("agent.max_obs_length", 256),
    "max_trajectory_length": ("agent.max_trajectory_length", 3072),
    "action_format": ("agent.action_format", "react"),
    "engine": ("actor_rollout_ref.rollout.name", "vllm"),
    "dtype": ("actor_rollout_ref.rollout.dtype", "auto"),
    "threads": ("actor_rollout_ref.num_threads", 2),
    "device": ("actor_rollout_ref.device", "cpu"),
    "request_timeout_s": ("agent.request_timeout_s", 30.0),
    "episode_timeout_s": ("agent.episode_timeout_s", 600.0),
}


def test_eval_flags_default_to_the_yaml():
    from openmanus_rl.eval import build_parser

    parser = build_parser()
    assert {flag: parser.get_default(flag) for flag in EVAL_FLAGS} == {
        flag: value for flag, (_, value) in EVAL_FLAGS.items()
    }
    assert {flag: yaml_value("ppo_trainer", key) for flag, (key, _) in EVAL_FLAGS.items()} == {
        flag: value for flag, (_, value) in EVAL_FLAGS.items()
    }
    assert "default 96: ppo_trainer.yaml agent.max_response_length" in " ".join(parser.format_help().split())


def test_eval_flags_follow_a_changed_yaml(monkeypatch):
    from openmanus_rl.eval import build_parser

    real = yaml_defaults.yaml_value
    monkeypatch.setattr(
        yaml_defaults, "yaml_value", lambda config, key="": 77 if key == "agent.max_obs_length" else real(config, key)
    )
    parser = build_parser()
    assert (parser.get_default("max_obs_length"), parser.get_default("max_prompt_length")) == (77, 1024)


def test_make_sft_data_flags_default_to_the_yaml():
    args = load_script("make_sft_data").parse_args(["--out", "x.parquet"])
    flags = (
        "env_name",
        "action_format",
        "max_prompt_length",
        "max_response_length",
        "max_obs_length",
        "max_trajectory_length",
    )
    assert {flag: getattr(args, flag) for flag in flags} == {flag: EVAL_FLAGS[flag][1] for flag in flags}
    assert args.max_turns == 8  # agent.max_turns is null: WebShop's own cap


def test_warm_start_flags_default_to_the_yaml():
    args = load_script("warm_start").build_parser().parse_args([])
    assert (args.env_name, args.action_format) == ("webshop", "react")


def test_single_turn_rollout_defaults_to_the_yaml_and_is_handed_its_sampling():
    from verl.trainer.ppo.single_turn import SingleTurnRollout

    params = inspect.signature(SingleTurnRollout).parameters
    assert params["sampling"].default is inspect.Parameter.empty
    assert {name: params[name].default for name in ("n", "max_prompt_length", "max_response_length", "seed")} == {
        "n": 1,
        "max_prompt_length": 1024,
        "max_response_length": 96,
        "seed": 1,
    }
    cfg = load_config(["data.rollout=single_turn", "actor_rollout_ref.model.path=m"], check_files=False)
    assert cfg.response_budget == 96
