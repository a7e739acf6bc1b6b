"""FrozenLake: maps and splits, the game's rules and messages on gymnasium, the oracle and the expert in process, and
the family-B protocol of a real server (literal exchange, the expert over HTTP)."""

from __future__ import annotations

import pytest
from episode_play import assert_runs_out, assert_step, assert_wins_at_the_end, play, play_task, started
from game_checks import assert_needs_an_episode, assert_noise_refused, assert_refuses_out_of_range, assert_split_ids
from json_call import assert_closes_the_only_env, call, episode_answer, own_server, server_of, step_answer

from agentgym.frozenlake.data import task_ids, task_list, task_map
from agentgym.frozenlake.env import FrozenLakeEnv
from agentgym.frozenlake.plan import oracle, shortest_path
from agentgym.open_envs import EpisodeStateError
from agentgym.registry import get_env_spec
from agentgym.spawn import serve_subprocess

SPEC = get_env_spec("frozenlake")
LEGEND = "Legend: P you, S start, F frozen ice (safe), H hole, G goal."
TASK0_OBS = "\n".join(
    [
        "Frozen lake 4x4: walk from the start S to the goal G without stepping into a hole H.",
        LEGEND,
        "P F F F",
        "H H F F",
        "F H H F",
        "H F F G",
        "You are at row 1, column 1; the goal is at row 4, column 4. Moves left: 30.",
    ]
)
TASK1_OBS = "\n".join(
    [
        "Frozen lake 5x5: walk from the start S to the goal G without stepping into a hole H.",
        LEGEND,
        "P H F H F",
        "F H F F F",
        "F F F F F",
        "F F F F F",
        "F F F H G",
        "You are at row 1, column 1; the goal is at row 5, column 5. Moves left: 30.",
    ]
)
TASK0_WON = "\n".join(
    [
        "You moved down and reached the goal.",
        LEGEND,
        "S F F F",
        "H H F F",
        "F H H F",
        "H F F P",
        "You are at row 4, column 4; the goal is at row 4, column 4. Moves left: 24. The episode is over.",
    ]
)


def view(message: str, rows: list[str], status: str) -> str:
    return "\n".join([message, LEGEND, *rows, status])


# ---------------------------------------------------------------------- maps and splits
def test_splits_are_disjoint_complete_and_stable() -> None:
    assert_split_ids(task_ids, range(200), range(200, 300), range(300, 1300))
    assert task_list("test")[:3] == [
        (0, "cross the 4x4 frozen lake"),
        (1, "cross the 5x5 frozen lake"),
        (2, "cross the 6x6 frozen lake"),
    ]
    assert task_list("dev")[0] == (200, "cross the 6x6 frozen lake") and task_list("train")[-1] == (
        1299,
        "cross the 4x4 frozen lake",
    )


def test_a_task_id_gives_the_same_map_every_time() -> None:
    assert task_map(0) == ("SFFF", "HHFF", "FHHF", "HFFG")
    assert task_map(5) == ("SHFFFF", "FFFHFF", "FHHHFF", "FFFFHF", "FHFHHF", "FFFFFG")
    task_map.cache_clear()
    assert task_map(0) == ("SFFF", "HHFF", "FHHF", "HFFG")  # drawn again, not read from the cache
    assert [len(task_map(i)) for i in range(6)] == [4, 5, 6, 4, 5, 6]
    env = FrozenLakeEnv()
    assert env.reset(1) == TASK1_OBS and env.reset(0) == TASK0_OBS and FrozenLakeEnv().reset(1) == TASK1_OBS
    with pytest.raises(ValueError, match=r"data_idx 1300 out of range: expected 0 <= data_idx < 1300"):
        task_map(1300)


# ---------------------------------------------------------------------- the game
def test_oracle_solves_every_test_task_with_reward_only_on_the_last_step() -> None:
    assert oracle(0) == ["right", "right", "right", "down", "down", "down"]
    assert oracle(1) == ["down", "down", "right", "right", "right", "right", "down", "down"]
    env, lengths = FrozenLakeEnv(), []
    for task_id in task_ids("test"):
        env.reset(task_id)
        actions = oracle(task_id)
        results = assert_wins_at_the_end(env, actions, task_id)
        assert results[-1].observation.startswith(f"You moved {actions[-1]} and reached the goal.\n"), task_id
        lengths.append(len(actions))
    assert (len(lengths), min(lengths), max(lengths), sum(lengths)) == (200, 6, 12, 1600)


def test_a_play_with_every_kind_of_message() -> None:
    env = started(FrozenLakeEnv(), 0)
    script = [
        (
            "up",
            "You cannot move up: the edge of the lake is there. Nothing changed.",
            ["P F F F", "H H F F", "F H H F", "H F F G"],
            "You are at row 1, column 1",
            29,
        ),
        (
            "  Move RIGHT. ",
            "You moved right.",
            ["S P F F", "H H F F", "F H H F", "H F F G"],
            "You are at row 1, column 2",
            28,
        ),
        (
            "go right",
            "You moved right.",
            ["S F P F", "H H F F", "F H H F", "H F F G"],
            "You are at row 1, column 3",
            27,
        ),
        ("left", "You moved left.", ["S P F F", "H H F F", "F H H F", "H F F G"], "You are at row 1, column 2", 26),
    ]
    for action, message, rows, where, left in script:
        assert_step(env, action, view(message, rows, f"{where}; the goal is at row 4, column 4. Moves left: {left}."))
    assert_step(
        env,
        "down",
        view(
            "You moved down into a hole.",
            ["S F F F", "H P F F", "F H H F", "H F F G"],
            "You are at row 2, column 2; the goal is at row 4, column 4. Moves left: 25. The episode is over.",
        ),
        0.0,
        True,
    )
    with pytest.raises(EpisodeStateError, match="episode is done: POST /reset to start a new one"):
        env.step("up")
    assert env.reset(0) == TASK0_OBS and env.position() == (0, 0) and not env.done


def test_the_last_move_ends_the_episode_without_reward() -> None:
    assert_runs_out(
        started(FrozenLakeEnv(), 0),
        "left",
        30,
        view(
            "You cannot move left: the edge of the lake is there. Nothing changed. You are out of moves.",
            ["P F F F", "H H F F", "F H H F", "H F F G"],
            "You are at row 1, column 1; the goal is at row 4, column 4. Moves left: 0. The episode is over.",
        ),
    )


INVALID = ["jump", "", "north", "up up", "move", "right now", "upp", "left!"]


@pytest.mark.parametrize("action", INVALID)
def test_an_invalid_action_changes_nothing_and_says_so(action: str) -> None:
    env = started(FrozenLakeEnv(), 0, "right")
    message = f'Invalid action "{action}": the actions are up, down, left and right. Nothing changed.'
    status = "You are at row 1, column 2; the goal is at row 4, column 4. Moves left: 28."
    assert_step(env, action, view(message, ["S P F F", "H H F F", "F H H F", "H F F G"], status))
    assert env.position() == (0, 1)


def test_reset_refuses_unknown_tasks_and_step_needs_an_episode() -> None:
    env = FrozenLakeEnv()
    assert_needs_an_episode(env, "up")
    assert_refuses_out_of_range(env.reset, "data_idx", 1300)


def test_shortest_path_avoids_holes_and_reports_none() -> None:
    assert shortest_path(["SH", "FG"], (0, 0)) == ["down", "right"]
    assert shortest_path(["SH", "HG"], (0, 0)) is None
    assert shortest_path(["FFF", "HPF", "FFG"], (1, 1)) == ["right", "down"]


# ---------------------------------------------------------------------- the expert, in process
def test_expert_reads_the_map_and_plays_every_test_task_in_process() -> None:
    from agentgym.frozenlake.expert import FrozenLakeExpert, read_map
    from openmanus_rl.experts import get_expert

    assert read_map(TASK1_OBS) == [list("PHFHF"), list("FHFFF"), list("FFFFF"), list("FFFFF"), list("FFFHG")]
    assert read_map("You moved up.") is None
    expert = get_expert("frozenlake")
    assert isinstance(expert, FrozenLakeExpert)
    env = FrozenLakeEnv()
    for task_id in task_ids("test"):
        played = play_task(expert, env, task_id, 30)
        assert (played.result.reward, len(played.actions)) == (1.0, len(oracle(task_id))), task_id


def test_expert_replies_in_each_template_and_noise_only_adds_safe_detours() -> None:
    from openmanus_rl.agent.templates import get_action_template
    from openmanus_rl.experts import get_expert, reply

    expert = get_expert("frozenlake")
    react = reply(expert, TASK1_OBS, "react", SPEC)
    assert react == "Thought: The goal is 8 moves away on a path around the holes, so I move down.\nAction: down"
    xml = reply(
        expert,
        view("You moved down.", ["S H F H F", "P H F F F", "F F F F F", "F F F F F", "F F F H G"], "Moves left: 29."),
        "xml",
        SPEC,
    )
    assert (
        xml
        == "<think>The goal is 7 moves away on a path around the holes, so I move down.</think>\n<action>down</action>"
    )
    assert get_action_template("xml").parse(xml, SPEC).action == "down"
    assert expert.act("You moved up.") == "up" and expert.last_thought == "I cannot see the map, so I try moving up."
    assert expert.act(view("x", ["P H", "H G"], "")) == "up"
    assert expert.last_thought == "I see no safe path to the goal, so I try moving up."

    noisy, env = get_expert("frozenlake", noise=1.0, seed=0, max_steps=12), FrozenLakeEnv()
    played = play(env, noisy.act, env.reset(0), 12)
    actions = played.actions
    # the path takes 6 moves, so 12 allow detours (never into a hole or off the map) while the goal stays in reach
    assert (played.result.reward, len(actions)) == (1.0, 12)
    assert played.first_lines == [f"You moved {a}." for a in actions[:-1]] + [
        f"You moved {actions[-1]} and reached the goal."
    ]
    assert_noise_refused("frozenlake", 2)


# ---------------------------------------------------------------------- over HTTP


server = server_of("frozenlake")


@pytest.mark.slow
def test_literal_protocol_exchange() -> None:
    with own_server("frozenlake") as u:
        assert call(u, "POST", "/create") == episode_answer(TASK0_OBS)
        assert call(u, "POST", "/reset", {"id": 0, "data_idx": 1}) == episode_answer(TASK1_OBS)
        moved = view(
            "You moved down.",
            ["S H F H F", "P H F F F", "F F F F F", "F F F F F", "F F F H G"],
            "You are at row 2, column 1; the goal is at row 5, column 5. Moves left: 29.",
        )
        assert call(u, "POST", "/step", {"id": 0, "action": "down"}) == step_answer(moved)
        fell = view(
            "You moved right into a hole.",
            ["S H F H F", "F P F F F", "F F F F F", "F F F F F", "F F F H G"],
            "You are at row 2, column 2; the goal is at row 5, column 5. Moves left: 28. The episode is over.",
        )
        assert call(u, "POST", "/step", {"id": 0, "action": "right"}) == step_answer(fell, done=True)
        assert call(u, "GET", "/observation", params={"id": 0}) == fell
        assert call(u, "POST", "/step", {"id": 0, "action": "up"}, status=409) == {
            "error": "episode is done: POST /reset to start a new one"
        }
        assert call(u, "POST", "/reset", {"id": 0}) == episode_answer(TASK0_OBS)
        answers = [call(u, "POST", "/step", {"id": 0, "action": a}) for a in oracle(0)]
        assert [(a["reward"], a["done"]) for a in answers] == [(0.0, False)] * 5 + [(1.0, True)]
        assert answers[-1] == step_answer(TASK0_WON, 1.0, True)
        assert_closes_the_only_env(u)
        assert call(u, "POST", "/create", {"ignored": True}) == episode_answer(TASK1_OBS, env_id=1)
    assert u.log.name.startswith("agentgym-frozenlake-") and not u.log.exists()  # a clean block deletes its log


@pytest.mark.slow
def test_a_server_block_that_fails_keeps_its_log() -> None:
    with pytest.raises(RuntimeError, match="the block failed"), serve_subprocess("frozenlake", timeout_s=60) as u:
        raise RuntimeError("the block failed")
    try:
        assert u.log.is_file()
    finally:
        u.log.unlink(missing_ok=True)


@pytest.mark.slow
def test_expert_over_http_solves_test_tasks(server: str) -> None:
    from openmanus_rl.experts import evaluate_expert

    ids = task_ids("test")[::8]  # 25 tasks, every map size
    score = evaluate_expert("frozenlake", "test", len(ids), server, task_ids=ids, max_turns=30)
    assert (score.n, score.successes, score.rewards) == (25, [True] * 25, [1.0] * 25)
    # one turn per move of a shortest path: no failed action, no extra turn
    assert score.steps == [6, 10, 8, 6, 10, 8, 6, 10, 8, 6, 10, 8, 6, 10, 8, 6, 12, 8, 6, 10, 8, 6, 10, 8, 6]
    assert score.steps == [len(oracle(i)) for i in ids]
