"""One source of defaults: every dataclass default equals what `ppo_trainer.yaml` gives (the YAML wins), key for key."""

import dataclasses

from omegaconf import OmegaConf

from openmanus_rl.agent import AgentConfig
from verl.trainer.ppo.config import PPOConfig, compose


def drift(defaults, yaml: dict, path: str = "") -> list[str]:
    """Every key whose dataclass default differs from the resolved YAML value, or that only one side has."""
    found = []
    names = {f.name for f in dataclasses.fields(defaults)}
    for key in sorted(names | set(yaml)):
        where = f"{path}{key}"
        if key not in yaml or key not in names:
            found.append(f"{where}: only in the {'dataclass' if key in names else 'YAML'}")
            continue
        value = getattr(defaults, key)
        if dataclasses.is_dataclass(value):
            found += drift(value, yaml[key], where + ".")
        elif isinstance(value, dict) and key == "agent":
            found += drift(AgentConfig(), yaml[key], where + ".")
        elif value != yaml[key]:
            found.append(f"{where}: dataclass {value!r}, YAML {yaml[key]!r}")
    return found


def test_dataclass_defaults_match_the_yaml():
    assert drift(PPOConfig(), OmegaConf.to_container(compose([]), resolve=True)) == []


def test_the_drift_check_sees_a_changed_default():
    yaml = OmegaConf.to_container(compose(["actor_rollout_ref.actor.clip_ratio=0.3", "+agent.extra=1"]), resolve=True)
    assert drift(PPOConfig(), yaml) == ["actor_rollout_ref.actor.clip_ratio: dataclass 0.2, YAML 0.3", "agent.extra: only in the YAML"]


def test_gigpo_has_its_own_std_switch_on_by_default():
    from verl.workers.config import from_dict

    assert OmegaConf.to_container(compose([]), resolve=True)["algorithm"]["gigpo"] == {
        "step_gamma": 0.95, "step_weight": 1.0, "norm_by_std": True}
    yaml = OmegaConf.to_container(compose(["algorithm.gigpo.norm_by_std=false", "actor_rollout_ref.model.path=m"]), resolve=True)
    alg = from_dict(PPOConfig, yaml, "config").algorithm
    assert (alg.gigpo.norm_by_std, alg.norm_adv_by_std_in_grpo) == (False, True)
