"""Mixed-env rollouts: one agent over real FrozenLake and Maze servers routes every row to the env its
``data_source`` names, and reports metrics per data source; the config checks for several envs."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import pytest
from agent_helpers import PLAIN, ScriptedGenerator, StreamingScriptedGenerator, text_policy

from agentgym.frozenlake.plan import oracle as frozenlake_oracle
from agentgym.maze.plan import oracle as maze_oracle
from agentgym.registry import get_env_spec
from agentgym.spawn import serve_subprocess
from openmanus_rl.agent import AgentConfig, OpenManusAgent
from openmanus_rl.experts import ExpertGenerator
from verl.protocol import DataProto

ROWS = [("frozenlake", 0), ("maze", 3), ("frozenlake", 1), ("maze", 7)]


def config(**overrides: Any) -> AgentConfig:
    return AgentConfig(**{"env_name": "frozenlake,maze", "env_ports": [36901, 36902, 36903, 36904], **overrides})


def test_ports_are_cut_into_one_run_per_env() -> None:
    assert config().env_names == ["frozenlake", "maze"]
    assert config().ports_by_env() == {"frozenlake": [36901, 36902], "maze": [36903, 36904]}
    assert AgentConfig().ports_by_env() == {"webshop": [36001]}
    config().validate()
    with pytest.raises(
        ValueError,
        match=r"env_ports must list the same number of ports for each of the 2 envs "
        r"\['frozenlake', 'maze'\].*got 3 ports",
    ):
        config(env_ports=[1, 2, 3]).validate()
    with pytest.raises(
        ValueError, match="env_name must name one env or several distinct envs separated by commas, got 'maze,maze'"
    ):
        config(env_name="maze,maze").validate()
    with pytest.raises(ValueError, match="unknown env 'chess'"):
        config(env_name="maze,chess").validate()


def test_each_env_has_its_own_turn_cap_unless_the_run_sets_one() -> None:
    assert AgentConfig().max_turns is None
    assert [config().turn_cap(env) for env in ("frozenlake", "maze")] == [12, 15]
    assert [AgentConfig(env_name=env).turn_cap(env) for env in ("webshop", "wordle", "sokoban", "babyai")] == [
        8,
        8,
        20,
        15,
    ]
    assert [config(max_turns=5).turn_cap(env) for env in ("frozenlake", "maze")] == [5, 5]
    # one rule, on the spec, for every reader of the two settings (agent, experts, demonstrations, evaluation)
    spec = get_env_spec("alfworld")
    assert (spec.turn_cap(None), spec.turn_cap(3), spec.token_budget(None), spec.token_budget(1024)) == (
        20,
        3,
        6656,
        1024,
    )
    assert dataclasses.replace(AgentConfig(), max_trajectory_length=None).trajectory_budget("alfworld") == 6656
    for bad in (0, 2.5, True):
        with pytest.raises(
            ValueError, match=rf"max_turns must be an int >= 1 \(or null: each env's own cap\), got {bad!r}"
        ):
            config(max_turns=bad).validate()


@pytest.fixture
def short_lake_budget(monkeypatch: pytest.MonkeyPatch) -> int:
    """FrozenLake's own trajectory budget set to 900 tokens for the test (Maze keeps its own)."""
    from agentgym.registry import ENV_SPECS

    monkeypatch.setitem(
        ENV_SPECS, "frozenlake", dataclasses.replace(ENV_SPECS["frozenlake"], max_trajectory_length=900)
    )
    return 900


def test_each_env_has_its_own_token_budget_unless_the_run_sets_one(short_lake_budget: int) -> None:
    maze = get_env_spec("maze").max_trajectory_length
    own = config(max_trajectory_length=None, max_prompt_length=512)
    assert [own.trajectory_budget(env) for env in ("frozenlake", "maze")] == [900, maze]
    assert (own.longest_trajectory, own.response_budget) == (max(900, maze), max(900, maze) - 512)
    fixed = config(max_trajectory_length=2000, max_prompt_length=512)
    assert [fixed.trajectory_budget(env) for env in ("frozenlake", "maze")] == [2000, 2000]
    assert (fixed.longest_trajectory, fixed.response_budget) == (2000, 1488)
    own.validate()
    with pytest.raises(
        ValueError,
        match=r"frozenlake's own max_trajectory_length \(EnvSpec\) \(900\) must leave room "
        r"after max_prompt_length \(850\) for one model turn of max_response_length "
        r"\(96\) plus its end-of-turn token: at least 947",
    ):
        config(max_trajectory_length=None, max_prompt_length=850).validate()
    with pytest.raises(
        ValueError, match=r"max_trajectory_length must be an int \(or null: each env's own budget\), got 2\.5"
    ):
        config(max_trajectory_length=2.5).validate()


def test_the_engine_context_must_hold_the_longest_budget(short_lake_budget: int) -> None:
    from verl.trainer.ppo.config import load_config
    from verl.utils.typed_config import ConfigError

    base = [
        "actor_rollout_ref.model.path=/nowhere",
        "agent.env_name='frozenlake,maze'",
        "agent.env_ports=[1,2]",
        "agent.max_prompt_length=512",
    ]
    maze = get_env_spec("maze").max_trajectory_length
    with pytest.raises(
        ConfigError,
        match=rf"the budget of frozenlake \(900\) / maze \({maze}\) \(agent.max_trajectory_length: "
        rf"null takes each env's EnvSpec.max_trajectory_length\) allows trajectories of "
        rf"{maze} tokens, more than the engine's context "
        rf"actor_rollout_ref.rollout.max_model_len=1024",
    ):
        load_config(
            [*base, "agent.max_trajectory_length=null", "actor_rollout_ref.rollout.max_model_len=1024"],
            check_files=False,
        )
    with pytest.raises(
        ConfigError,
        match=r"agent.max_trajectory_length allows trajectories of 3000 tokens, more than the "
        r"engine's context actor_rollout_ref.rollout.max_model_len=2048",
    ):
        load_config(
            [*base, "agent.max_trajectory_length=3000", "actor_rollout_ref.rollout.max_model_len=2048"],
            check_files=False,
        )
    load_config([*base, "agent.max_trajectory_length=null"], check_files=False)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with serve_subprocess("frozenlake", timeout_s=60) as lake, serve_subprocess("maze", timeout_s=60) as maze:
        yield lake, maze


@pytest.mark.slow
def test_each_row_goes_to_its_env_and_metrics_are_per_source(servers: tuple[str, str], tokenizer: Any) -> None:
    lake, maze = servers
    agent_config = {
        "env_name": "frozenlake,maze",
        "env_ports": [lake.port, maze.port],
        "max_turns": 16,
        "max_trajectory_length": 4096,
        "rollout_mode": "sync",
        "write_viewer": False,
        "sampling": PLAIN,
    }
    batch = DataProto.from_dict(
        non_tensors={
            "data_source": [s for s, _ in ROWS],
            "extra_info": [{"index": i, "split": "test"} for _, i in ROWS],
        }
    )
    generator = ExpertGenerator(tokenizer, "frozenlake,maze", "react")
    with OpenManusAgent(tokenizer, generator, agent_config) as agent:
        out = agent.run_llm_loop(batch)
        nt, metrics = out.non_tensor_batch, out.meta_info["metrics"]
        assert list(nt["data_source"]) == ["frozenlake", "maze", "frozenlake", "maze"]
        assert list(nt["env_server"]) == [lake, maze, lake, maze]
        assert list(nt["success"]) == [True] * 4 and list(nt["env_reward"]) == [1.0] * 4
        # FrozenLake's expert sees the map (a shortest path); Maze's sees only the walls beside it and
        # takes two detours on start 3
        assert [len(frozenlake_oracle(0)), len(maze_oracle(3)), len(frozenlake_oracle(1)), len(maze_oracle(7))] == [
            6,
            11,
            8,
            10,
        ]
        assert list(nt["num_turns"]) == [6, 13, 8, 10]
        first = [turns[0]["text"] for turns in nt["trajectory"]]
        assert first[0].startswith("Frozen lake 4x4") and first[1].startswith("The goal is at position 8, 6.")
        assert {k: v for k, v in metrics.items() if k.startswith(("env/frozenlake/", "env/maze/"))} == {
            "env/frozenlake/success_rate": 1.0,
            "env/frozenlake/reward/mean": 1.0,
            "env/frozenlake/turns/mean": 7.0,
            "env/frozenlake/trajectories": 2.0,
            "env/frozenlake/failed_trajectories": 0.0,
            "env/maze/success_rate": 1.0,
            "env/maze/reward/mean": 1.0,
            "env/maze/turns/mean": 11.5,
            "env/maze/trajectories": 2.0,
            "env/maze/failed_trajectories": 0.0,
        }
        assert metrics["reward/frozenlake/total/mean"] == 1.0 and metrics["env/success_rate"] == 1.0

        unknown = DataProto.from_dict(
            non_tensors={"data_source": ["maze", "sokoban"], "extra_info": [{"index": 0}, {"index": 0}]}
        )
        with pytest.raises(
            ValueError,
            match=r"row 1 has data_source 'sokoban', which names none of the envs "
            r"\['frozenlake', 'maze'\] of agent.env_name",
        ):
            agent.run_llm_loop(unknown)


GRPO = ["preset=grpo"]  # the job's recipe, as train_grpo.sh selects it


@pytest.mark.parametrize(
    "env_name",
    ["babyai", "frozenlake", "maze", "sciworld", "sokoban", "textcraft", "webshop", "wordle", "babyai,webshop"],
)
def test_every_env_and_a_mix_pass_the_grpo_jobs_config_check(env_name: str, tiny_model_path: str, tmp_path) -> None:
    """What ``./train_grpo.sh --env_name <env>`` checks before any work, on that env's own prepared data."""
    import subprocess
    import sys

    from verl.trainer.ppo.config import load_config

    subprocess.run(
        [
            sys.executable,
            "scripts/prepare_data.py",
            "--env_name",
            env_name,
            "--out",
            str(tmp_path),
            "--train_size",
            "4",
            "--dev_size",
            "2",
            "--test_size",
            "2",
        ],
        check=True,
        capture_output=True,
    )
    folder = tmp_path / env_name.replace(",", "+")
    envs = env_name.split(",")
    ports = list(range(36901, 36901 + len(envs)))
    cfg = load_config(
        [
            *GRPO,
            f"actor_rollout_ref.model.path={tiny_model_path}",
            f"data.train_files={folder / 'train.parquet'}",
            f"data.val_files={folder / 'dev.parquet'}",
            f"agent.env_name='{env_name}'",
            f"agent.env_ports={ports}",
            "agent.manage_servers=true",
            f"trainer.output_dir={tmp_path / 'out'}",
            f"trainer.default_local_dir={tmp_path / 'ckpt'}",
        ]
    )
    assert cfg.agent["env_name"] == env_name
    assert AgentConfig(**cfg.agent).ports_by_env() == {env: [port] for env, port in zip(envs, ports)}


def test_a_mixed_dataset_takes_the_envs_in_turn(tmp_path) -> None:
    """Validation keeps the first ``data.val_max_samples`` rows: a mix written env after env validated the first env
    only (``babyai,webshop``: 8 BabyAI dev tasks, no WebShop). Rows now alternate until the shorter env runs out."""
    import subprocess
    import sys

    import pandas as pd

    from agentgym.registry import ENV_SPECS
    from agentgym.spec import load_object

    subprocess.run(
        [
            sys.executable,
            "scripts/prepare_data.py",
            "--env_name",
            "frozenlake,maze",
            "--out",
            str(tmp_path),
            "--train_size",
            "3",
            "--test_size",
            "2",
        ],
        check=True,
        capture_output=True,
    )
    dev = pd.read_parquet(tmp_path / "frozenlake+maze" / "dev.parquet")
    ids = {env: [int(i) for i, _ in load_object(ENV_SPECS[env].tasks)("dev")] for env in ("frozenlake", "maze")}
    assert (len(ids["frozenlake"]), len(ids["maze"])) == (100, 26)
    expected = [(env, ids[env][i]) for i in range(26) for env in ("frozenlake", "maze")]
    expected += [("frozenlake", i) for i in ids["frozenlake"][26:]]
    assert list(zip(dev["data_source"], [e["index"] for e in dev["extra_info"]])) == expected
    train = pd.read_parquet(tmp_path / "frozenlake+maze" / "train.parquet")
    assert list(train["data_source"]) == ["frozenlake", "maze"] * 3


def test_the_config_check_names_a_bad_env_list() -> None:
    from verl.trainer.ppo.config import load_config
    from verl.utils.typed_config import ConfigError

    base = ["actor_rollout_ref.model.path=/nowhere"]
    with pytest.raises(ConfigError, match="agent: unknown env 'nope'"):
        load_config([*base, "agent.env_name='babyai,nope'", "agent.env_ports=[1,2]"], check_files=False)
    with pytest.raises(ConfigError, match="agent: env_ports must list the same number of ports for each of the 2 envs"):
        load_config([*base, "agent.env_name='babyai,maze'", "agent.env_ports=[1,2,3]"], check_files=False)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_episode_ends_at_its_own_envs_turn_cap(servers: tuple[str, str], tokenizer: Any, mode: str) -> None:
    """A policy that never writes an action: FrozenLake rows stop after 12 turns, Maze rows after 15, in one batch."""
    lake, maze = servers
    policy = text_policy(tokenizer, lambda prompt: "I am not sure yet.")
    generator = (StreamingScriptedGenerator if mode == "async" else ScriptedGenerator)(policy)
    agent_config = {
        "env_name": "frozenlake,maze",
        "env_ports": [lake.port, maze.port],
        "max_trajectory_length": 8192,
        "rollout_mode": mode,
        "write_viewer": False,
        "sampling": PLAIN,
    }
    batch = DataProto.from_dict(
        non_tensors={
            "data_source": [s for s, _ in ROWS],
            "extra_info": [{"index": i, "split": "test"} for _, i in ROWS],
        }
    )
    with OpenManusAgent(tokenizer, generator, agent_config) as agent:
        nt = agent.run_llm_loop(batch).non_tensor_batch
    assert list(nt["num_turns"]) == [12, 15, 12, 15]
    assert list(nt["status"]) == ["turn_limit"] * 4 and list(nt["success"]) == [False] * 4


@pytest.mark.slow
def test_an_episode_ends_at_its_own_envs_token_budget(
    servers: tuple[str, str], tokenizer: Any, short_lake_budget: int
) -> None:
    """The same policy under each env's own budget: FrozenLake's rows (900 tokens) run out of budget before their
    12 turns, Maze's (its own, larger budget) play their 15; no response outgrows its env's budget."""
    lake, maze = servers
    policy = text_policy(tokenizer, lambda prompt: "I am not sure yet.")
    agent_config = {
        "env_name": "frozenlake,maze",
        "env_ports": [lake.port, maze.port],
        "max_trajectory_length": None,
        "max_prompt_length": 512,
        "write_viewer": False,
        "sampling": PLAIN,
    }
    batch = DataProto.from_dict(
        non_tensors={
            "data_source": [s for s, _ in ROWS],
            "extra_info": [{"index": i, "split": "test"} for _, i in ROWS],
        }
    )
    with OpenManusAgent(tokenizer, ScriptedGenerator(policy), agent_config) as agent:
        out = agent.run_llm_loop(batch)
    nt = out.non_tensor_batch
    assert list(nt["status"]) == ["truncated", "turn_limit", "truncated", "turn_limit"]
    assert nt["num_turns"][0] == nt["num_turns"][2] < 12 and list(nt["num_turns"][1::2]) == [15, 15]
    response_tokens = out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :].sum(dim=1).tolist()
    assert max(response_tokens[0::2]) <= short_lake_budget - 512 < max(response_tokens[1::2])
