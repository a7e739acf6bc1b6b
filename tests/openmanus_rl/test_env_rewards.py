"""Each env's rows are scored by the reward module its `EnvSpec` names; the engine knows no env by name."""

import pytest
import torch

from openmanus_rl.envs import ENV_SPECS, EnvSpec, register_env
from verl.protocol import DataProto
from verl.trainer.ppo.reward import RewardManager
from verl.utils.batch import pack_sequences
from verl.utils.reward_score import DATA_SOURCE_TO_FN, SUPPORTED_REWARD_SCORE_FNS, get_reward_score_fn

TEXT_STUB = type("T", (), {"decode": staticmethod(lambda ids, skip_special_tokens: "x")})()


def test_every_registered_env_maps_to_the_episode_reward():
    assert {name: DATA_SOURCE_TO_FN[name] for name in ENV_SPECS} == {name: "episode" for name in ENV_SPECS}
    assert get_reward_score_fn(None, "webshop")[0] == "episode"


def test_default_episode_reward_pays_the_agents_composed_reward():
    packed = pack_sequences(
        [[1, 2], [3]], [[10, 11, 12, 13], [20, 21]], response_masks=[[1, 1, 0, 1], [1, 1]], pad_id=0
    )
    batch = DataProto.from_dict(
        packed,
        {
            "data_source": ["webshop", "webshop"],
            "task_id": [5, 6],
            "success": [True, False],
            "num_turns": [2, 1],
            "reward_total": [0.7, 0.0],
            "turn_ends": [[1, 3], [1]],
            "failed": [False, False],
        },
    )
    assert RewardManager(tokenizer=TEXT_STUB, allocation="discounted", gamma=0.5)(batch) == {
        "reward/episode/mean": pytest.approx(0.35),
        "reward/errors": 0.0,
    }
    # row 0: R = 0.7 over two turns ending at 1 and 3: 0.5 * 0.7, 0.7; row 1: R = 0
    torch.testing.assert_close(
        batch.batch["token_level_scores"], torch.tensor([[0.0, 0.35, 0.0, 0.7], [0.0, 0.0, 0.0, 0.0]])
    )
    torch.testing.assert_close(batch.batch["outcome_scores"], torch.tensor([0.7, 0.0]))


def test_an_env_can_bring_its_own_reward_module():
    spec = EnvSpec(name="t_env_own_reward", family="A", reset_field="id", instructions="-", reward_score="exact_match")
    try:
        register_env(spec)
        assert get_reward_score_fn(None, "t_env_own_reward") == (
            "exact_match",
            SUPPORTED_REWARD_SCORE_FNS["exact_match"],
        )
        with pytest.raises(ValueError, match="unknown reward score 'nope'"):
            register_env(
                EnvSpec(name="t_env_bad_reward", family="A", reset_field="id", instructions="-", reward_score="nope")
            )
        assert "t_env_bad_reward" not in ENV_SPECS
    finally:
        ENV_SPECS.pop("t_env_own_reward", None)
        DATA_SOURCE_TO_FN.pop("t_env_own_reward", None)
