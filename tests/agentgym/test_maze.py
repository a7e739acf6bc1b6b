"""Maze: the map, starts and splits, the game's rules and messages, the oracle and the expert in process, and the
family-B protocol under /maze of a real LMRL-Gym server (literal exchange, the maze's own bad input, the expert
over HTTP)."""

from __future__ import annotations

import pytest
from episode_play import assert_runs_out, assert_step, assert_wins_at_the_end, play_task, started
from game_checks import assert_needs_an_episode, assert_noise_refused, assert_refuses_out_of_range, assert_split_ids
from json_call import call, episode_answer, own_server, server_of, step_answer

from agentgym.maze.data import GOAL, MAZE, NUM_TASKS, STARTS, is_open, start_of, task_ids, task_list
from agentgym.maze.env import MazeEnv, describe_walls
from agentgym.maze.plan import oracle, shortest_path
from agentgym.open_envs import EpisodeStateError
from agentgym.registry import get_env_spec

SPEC = get_env_spec("maze")
WHERE = "The goal is at position 8, 6. Your current position is at position"
TASK0_OBS = f"{WHERE} 1, 1. There are walls above you, below you, to your left. Moves left: 50."
TASK3_OBS = f"{WHERE} 1, 4. There are walls above you, below you. Moves left: 50."
TASK0_WON = (
    f"You moved down and reached the goal. {WHERE} 8, 6. There are walls below you, to your left, to your "
    "right. Moves left: 38. The episode is over."
)
ORACLE_LENGTHS = [12, 11, 10, 11, 12, 12, 11, 10, 11, 12, 9, 9, 8, 8, 7, 7, 6, 6, 5, 4, 3, 2, 3, 4, 5, 1]


# ---------------------------------------------------------------------- the map, starts and splits
def test_the_map_has_26_starts_and_the_goal_at_8_6() -> None:
    assert (len(MAZE), {len(row) for row in MAZE}, GOAL, MAZE[8][6]) == (10, {13}, (8, 6), "G")
    assert STARTS[:6] == ((1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 7)) and STARTS[-2:] == ((6, 9), (7, 6))
    open_cells = {(r, c) for r in range(10) for c in range(13) if is_open((r, c))}
    assert len(STARTS) == len(set(STARTS)) == 26 and open_cells == set(STARTS) | {GOAL}
    assert not is_open((1, 6)) and not is_open((-1, 0)) and not is_open((10, 6))
    assert [start_of(i) for i in (0, 25, 26, 259)] == [(1, 1), (7, 6), (1, 1), (7, 6)]
    assert_refuses_out_of_range(start_of, "game", 260, ValueError)


def test_splits_are_disjoint_complete_and_stable() -> None:
    assert_split_ids(task_ids, range(26), range(26, 52), range(52, 260))
    assert NUM_TASKS == 260
    assert [start_of(i) for i in task_ids("test")] == list(STARTS)  # the test split walks from every start once
    assert task_list("test")[:2] == [
        (0, "walk from position 1, 1 to the goal at position 8, 6"),
        (1, "walk from position 1, 2 to the goal at position 8, 6"),
    ]
    assert task_list("dev")[0] == (26, "walk from position 1, 1 to the goal at position 8, 6")
    assert task_list("train")[-1] == (259, "walk from position 7, 6 to the goal at position 8, 6")


# ---------------------------------------------------------------------- the game
def test_oracle_solves_every_test_task_with_reward_only_on_the_last_step() -> None:
    assert oracle(0) == ["move right", "move right"] + ["move down"] * 5 + ["move right"] * 3 + ["move down"] * 2
    env, lengths = MazeEnv(), []
    for task_id in task_ids("test"):
        assert env.reset(task_id).startswith(f"{WHERE} {start_of(task_id)[0]}, {start_of(task_id)[1]}. ")
        actions = oracle(task_id)
        results = assert_wins_at_the_end(env, actions, task_id)
        assert results[-1].observation.startswith(f"You moved {actions[-1][5:]} and reached the goal. "), task_id
        lengths.append(len(actions))
    assert lengths == ORACLE_LENGTHS
    env.reset(0)
    assert [env.step(a) for a in oracle(0)][-1].observation == TASK0_WON


def test_a_play_with_every_kind_of_message() -> None:
    env = MazeEnv()
    assert env.reset(3) == TASK3_OBS
    script = [
        (
            "move up",
            "You cannot move up: there is a wall above you. Nothing changed.",
            "1, 4. There are walls above you, below you.",
            49,
        ),
        (
            " Move  DOWN. ",
            "You cannot move down: there is a wall below you. Nothing changed.",
            "1, 4. There are walls above you, below you.",
            48,
        ),
        ("left", "You moved left.", "1, 3. There is a wall above you.", 47),
        ("move down", "You moved down.", "2, 3. There are walls to your left, to your right.", 46),
        (
            "move right",
            "You cannot move right: there is a wall to your right. Nothing changed.",
            "2, 3. There are walls to your left, to your right.",
            45,
        ),
    ]
    for action, message, here, left in script:
        assert_step(env, action, f"{message} {WHERE} {here} Moves left: {left}.")
    assert env.position == (2, 3) and env.steps == 5
    assert env.reset(3) == TASK3_OBS and env.position == (1, 4) and env.steps == 0 and not env.done


def test_the_last_move_ends_the_episode_without_reward() -> None:
    env = started(MazeEnv(), 0)
    assert_runs_out(
        env,
        "move up",
        50,
        f"You cannot move up: there is a wall above you. Nothing changed. You are out of moves. {WHERE} 1, 1. There "
        "are walls above you, below you, to your left. Moves left: 0. The episode is over.",
    )
    with pytest.raises(EpisodeStateError, match="episode is done: POST /maze/reset to start a new one"):
        env.step("move right")


INVALID = ["jump", "", "north", "move", "move up up", "go up", "up!", "move diagonally"]


@pytest.mark.parametrize("action", INVALID)
def test_an_invalid_action_changes_nothing_and_says_so(action: str) -> None:
    env = started(MazeEnv(), 0, "move right")
    message = (
        f'Invalid action "{action}": the actions are move up, move down, move left and move right. Nothing changed.'
    )
    assert_step(env, action, f"{message} {WHERE} 1, 2. There are walls above you, below you. Moves left: 48.")
    assert env.position == (1, 2)


def test_reset_refuses_unknown_tasks_and_step_and_observation_need_an_episode() -> None:
    env = MazeEnv()
    assert_needs_an_episode(env, "move up", r"no episode yet: POST /maze/reset first", observation=True)
    assert_refuses_out_of_range(env.reset, "game", 260)
    env.reset(0)
    env.close()
    assert_needs_an_episode(env, "move right")


def test_walls_are_named_above_below_left_right_and_paths_are_shortest() -> None:
    assert describe_walls((6, 6)) == "There is a wall above you."
    assert describe_walls((6, 3)) == "There are walls below you, to your left."
    assert describe_walls(GOAL) == "There are walls below you, to your left, to your right."
    assert shortest_path(lambda cell: True, (0, 0), (2, 1)) == ["down", "down", "right"]
    assert shortest_path(lambda cell: cell != (1, 0), (0, 0), (2, 0)) == ["left", "down", "down", "right"]
    assert shortest_path(lambda cell: abs(cell[0]) + abs(cell[1]) < 2, (0, 0), (2, 0)) is None


# ---------------------------------------------------------------------- the expert, in process
EXPERT_STEPS = [12, 11, 10, 13, 12, 12, 13, 10, 11, 12, 9, 9, 8, 8, 7, 7, 6, 6, 5, 4, 3, 2, 3, 4, 5, 1]


def test_expert_maps_the_maze_from_the_observations_and_solves_every_test_task() -> None:
    from agentgym.maze.expert import MazeExpert, View, read_view
    from openmanus_rl.experts import get_expert

    assert read_view(TASK3_OBS) == View((8, 6), (1, 4), frozenset({"up", "down"}), 50)
    assert read_view(TASK0_WON) == View((8, 6), (8, 6), frozenset({"down", "left", "right"}), 38)
    assert read_view("You moved up.") is None
    expert, env = get_expert("maze"), MazeEnv()
    assert isinstance(expert, MazeExpert)
    results = [play_task(expert, env, task_id, 50) for task_id in task_ids("test")]
    assert [played.result.reward for played in results] == [1.0] * 26
    # a shortest path but from (1, 4) and (1, 8), where it first tries the unseen side of the top bar
    assert [len(played.actions) for played in results] == EXPERT_STEPS
    assert sum(EXPERT_STEPS) - sum(ORACLE_LENGTHS) == 4


def test_expert_replies_in_each_template_and_noise_only_adds_detours() -> None:
    from openmanus_rl.agent.templates import get_action_template
    from openmanus_rl.experts import get_expert, reply

    expert = get_expert("maze")
    react = reply(expert, TASK0_OBS, "react", SPEC)
    assert react == (
        "Thought: The goal at 8, 6 is at least 12 moves away through corridors I have not seen yet, so I "
        "move right.\nAction: move right"
    )
    xml = reply(
        expert,
        f"You moved down and reached the goal. {WHERE} 7, 6. There are walls to your left, to your "
        "right. Moves left: 9.",
        "xml",
        SPEC,
    )
    assert xml == (
        "<think>The goal at 8, 6 is at least 1 move away through corridors I have seen, so I move "
        "down.</think>\n<action>move down</action>"
    )  # no wall below: the goal's cell is known open
    assert get_action_template("xml").parse(xml, SPEC).action == "move down"
    assert expert.act("You moved up.") == "move up"
    assert expert.last_thought == "I cannot tell where I am, so I try moving up."

    env = MazeEnv()
    noisy = [play_task(get_expert("maze", noise=1.0, seed=0), env, task_id, 50) for task_id in (0, 9, 21)]
    assert [played.result.reward for played in noisy] == [1.0, 1.0, 1.0]
    assert all(len(played.actions) > length for played, length in zip(noisy, (12, 12, 2)))
    assert_noise_refused("maze", -1)


# ---------------------------------------------------------------------- over HTTP


server = server_of("maze")


def test_literal_protocol_exchange() -> None:
    with own_server("maze") as u:
        assert call(u, "POST", "/maze/create") == {"id": 0}
        assert call(u, "POST", "/maze/reset", {"id": 0, "game": 3}) == episode_answer(TASK3_OBS)
        walled = (
            f"You cannot move up: there is a wall above you. Nothing changed. {WHERE} 1, 4. There are walls above "
            "you, below you. Moves left: 49."
        )
        assert call(u, "POST", "/maze/step", {"id": 0, "action": "move up"}) == step_answer(walled)
        moved = f"You moved left. {WHERE} 1, 3. There is a wall above you. Moves left: 48."
        assert call(u, "POST", "/maze/step", {"id": 0, "action": "move left"}) == step_answer(moved)
        assert call(u, "GET", "/maze/observation", params={"id": 0}) == moved
        assert call(u, "POST", "/maze/reset", {"id": 0, "game": 0}) == episode_answer(TASK0_OBS)
        answers = [call(u, "POST", "/maze/step", {"id": 0, "action": a}) for a in oracle(0)]
        assert [(a["reward"], a["done"]) for a in answers] == [(0.0, False)] * 11 + [(1.0, True)]
        assert answers[-1] == step_answer(TASK0_WON, 1.0, True)
        assert call(u, "POST", "/maze/step", {"id": 0, "action": "move up"}, status=409) == {
            "error": "episode is done: POST /maze/reset to start a new one"
        }
        assert call(u, "GET", "/maze/list_envs") == [0] and call(u, "GET", "/wordle/list_envs") == []
        assert call(u, "POST", "/maze/close", {"id": 0}) is True
        assert call(u, "GET", "/maze/list_envs") == []
        assert call(u, "POST", "/maze/create", {"ignored": True}) == {"id": 1}
        assert call(u, "GET", "/maze/observation", params={"id": 1}, status=409) == {
            "error": "no episode yet: POST /maze/reset first"
        }


def test_reset_needs_a_game_and_routes_live_under_maze(server: str) -> None:
    env_id = call(server, "POST", "/maze/create")["id"]
    assert call(server, "POST", "/maze/reset", {"id": env_id}, status=422) == {
        "error": "invalid request: game: Field required"
    }
    assert call(server, "POST", "/reset", {"id": env_id, "game": 0}, status=404) == {"error": "Not Found"}
    assert call(server, "POST", "/maze/close", {"id": env_id}) is True


def test_expert_over_http_solves_test_tasks(server: str) -> None:
    from openmanus_rl.experts import evaluate_expert

    ids = task_ids("test")[::3]  # 9 starts
    score = evaluate_expert("maze", "test", len(ids), server, task_ids=ids, max_turns=50)
    assert (score.n, score.successes, score.rewards) == (9, [True] * 9, [1.0] * 9)
    assert score.steps == [EXPERT_STEPS[i] for i in ids] == [12, 13, 13, 12, 8, 7, 5, 2, 5]
