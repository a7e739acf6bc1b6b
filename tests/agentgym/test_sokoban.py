"""Sokoban: levels and splits, the push rule and the game's messages, the solver, the oracle and the expert in
process, and the family-B protocol of a real server (literal exchange, the expert over HTTP)."""

from __future__ import annotations

import pytest
from episode_play import assert_runs_out, assert_step, assert_wins_at_the_end, play, play_on, play_task, started
from game_checks import assert_needs_an_episode, assert_noise_refused, assert_refuses_out_of_range, assert_split_ids
from json_call import assert_closes_the_only_env, call, episode_answer, own_server, server_of, step_answer

from agentgym.open_envs import EpisodeStateError
from agentgym.registry import get_env_spec
from agentgym.sokoban.data import Board, level, parse_board, room_shape, task_ids, task_list
from agentgym.sokoban.env import SokobanEnv
from agentgym.sokoban.plan import oracle, solve

SPEC = get_env_spec("sokoban")
LEGEND = "Legend: # wall, _ floor, @ you, $ box, . target, * box on a target, + you on a target."
TASK0_ROWS = ["# # # # # #", "# _ _ _ _ #", "# . $ # _ #", "# _ _ _ _ #", "# @ _ _ _ #", "# # # # # #"]
TASK1_ROWS = [
    "# # # # # # #",
    "# @ _ _ . _ #",
    "# _ # _ _ _ #",
    "# _ _ _ _ _ #",
    "# _ $ _ _ _ #",
    "# _ _ _ _ _ #",
    "# # # # # # #",
]
TASK0_OBS = "\n".join(
    [
        "Sokoban room 6x6: push every box onto a target.",
        LEGEND,
        *TASK0_ROWS,
        "You are at row 5, column 2. Boxes on targets: 0 of 1. Moves left: 60.",
    ]
)
TASK1_OBS = "\n".join(
    [
        "Sokoban room 7x7: push every box onto a target.",
        LEGEND,
        *TASK1_ROWS,
        "You are at row 2, column 2. Boxes on targets: 0 of 1. Moves left: 60.",
    ]
)
# two boxes side by side: every kind of move on one board
RULES_ROWS = ["# # # # # #", "# _ _ _ _ #", "# @ $ $ . #", "# _ _ . _ #", "# # # # # #"]


def view(message: str, rows: list[str], status: str) -> str:
    return "\n".join([message, LEGEND, *rows, status])


# ---------------------------------------------------------------------- levels and splits
def test_splits_are_disjoint_complete_and_stable() -> None:
    assert_split_ids(task_ids, range(200), range(200, 300), range(300, 1300))
    assert task_list("test")[:4] == [
        (0, "push 1 box onto a target in a 6x6 room"),
        (1, "push 1 box onto a target in a 7x7 room"),
        (2, "push 2 boxes onto targets in a 6x6 room"),
        (3, "push 2 boxes onto targets in a 7x7 room"),
    ]
    assert task_list("dev")[0] == (200, "push 1 box onto a target in a 6x6 room")


def test_a_task_id_gives_the_same_level_every_time() -> None:
    assert level(0).rows() == TASK0_ROWS and level(1).rows() == TASK1_ROWS
    level.cache_clear()
    assert level(0).rows() == TASK0_ROWS  # generated again, not read from the cache
    assert level(2).rows() == ["# # # # # #", "# . _ $ _ #", "# _ $ _ . #", "# _ _ _ _ #", "# _ @ _ _ #", "# # # # # #"]
    env = SokobanEnv()
    assert env.reset(1) == TASK1_OBS and env.reset(0) == TASK0_OBS and SokobanEnv().reset(1) == TASK1_OBS
    with pytest.raises(ValueError, match=r"data_idx 1300 out of range: expected 0 <= data_idx < 1300"):
        level(1300)


def test_levels_have_their_shape_and_a_solution_of_8_to_40_moves() -> None:
    lengths = []
    for task_id in task_ids("test")[:40]:
        board, (side, boxes) = level(task_id), room_shape(task_id)
        assert (board.height, board.width, len(board.boxes), len(board.targets)) == (side, side, boxes, boxes)
        assert not board.boxes & board.targets and board.player not in board.walls | board.boxes
        assert {(0, c) for c in range(side)} | {(r, 0) for r in range(side)} <= board.walls
        assert parse_board(board.rows()) == board
        lengths.append(len(oracle(task_id)))
    assert lengths == [
        15,
        10,
        13,
        14,
        8,
        8,
        12,
        10,
        11,
        12,
        15,
        10,
        14,
        10,
        13,
        11,
        11,
        18,
        9,
        20,
        10,
        10,
        11,
        10,
        8,
        11,
        16,
        9,
        10,
        9,
        8,
        13,
        8,
        10,
        12,
        11,
        8,
        8,
        12,
        8,
    ]


# ---------------------------------------------------------------------- the rules and the game
def test_oracle_solves_test_tasks_with_reward_only_on_the_last_step() -> None:
    assert oracle(1) == ["down", "down", "down", "right", "right", "down", "right", "up", "up", "up"]
    env = SokobanEnv()
    for task_id in task_ids("test")[:40]:
        env.reset(task_id)
        actions = oracle(task_id)
        results = assert_wins_at_the_end(env, actions, task_id)
        assert results[-1].observation.startswith(
            f"You pushed a box {actions[-1]} onto a target. Every box is on a target.\n"
        ), task_id
        assert not any("Nothing changed" in r.observation for r in results), task_id


def test_a_play_with_every_kind_of_move_and_message() -> None:
    env = started(SokobanEnv(), 0)
    env.board = parse_board(RULES_ROWS)
    script = [
        ("right", "You cannot push the box right: another box is behind it. Nothing changed.", RULES_ROWS),
        ("left", "You cannot move left: a wall is there. Nothing changed.", RULES_ROWS),
        ("  Move UP. ", "You moved up.", ["# # # # # #", "# @ _ _ _ #", "# _ $ $ . #", "# _ _ . _ #", "# # # # # #"]),
        ("go right", "You moved right.", ["# # # # # #", "# _ @ _ _ #", "# _ $ $ . #", "# _ _ . _ #", "# # # # # #"]),
        ("right", "You moved right.", ["# # # # # #", "# _ _ @ _ #", "# _ $ $ . #", "# _ _ . _ #", "# # # # # #"]),
        (
            "down",
            "You pushed a box down onto a target.",
            ["# # # # # #", "# _ _ _ _ #", "# _ $ @ . #", "# _ _ * _ #", "# # # # # #"],
        ),
        (
            "down",
            "You cannot push the box down: a wall is behind it. Nothing changed.",
            ["# # # # # #", "# _ _ _ _ #", "# _ $ @ . #", "# _ _ * _ #", "# # # # # #"],
        ),
    ]
    for step, (action, message, rows) in enumerate(script, 1):
        result = env.step(action)
        row, col = env.board.player  # type: ignore[union-attr]
        on = 1 if step >= 6 else 0
        status = f"You are at row {row + 1}, column {col + 1}. Boxes on targets: {on} of 2. Moves left: {60 - step}."
        assert (result.observation, result.reward, result.done) == (view(message, rows, status), 0.0, False), action
    play_on(env, ["up", "left", "left", "down", "right"])
    assert_step(
        env,
        "right",
        view(
            "You pushed a box right onto a target. Every box is on a target.",
            ["# # # # # #", "# _ _ _ _ #", "# _ _ @ * #", "# _ _ * _ #", "# # # # # #"],
            "You are at row 3, column 4. Boxes on targets: 2 of 2. Moves left: 47. The episode is over.",
        ),
        1.0,
        True,
    )
    with pytest.raises(EpisodeStateError, match="episode is done: POST /reset to start a new one"):
        env.step("up")
    assert env.reset(0) == TASK0_OBS and env.board == level(0) and not env.done


def test_the_last_move_ends_the_episode_without_reward() -> None:
    assert_runs_out(
        started(SokobanEnv(), 0),
        "left",
        60,
        view(
            "You cannot move left: a wall is there. Nothing changed. You are out of moves.",
            TASK0_ROWS,
            "You are at row 5, column 2. Boxes on targets: 0 of 1. Moves left: 0. The episode is over.",
        ),
    )


INVALID = ["jump", "", "north", "up up", "move", "push right", "upp", "left!"]


@pytest.mark.parametrize("action", INVALID)
def test_an_invalid_action_changes_nothing_and_says_so(action: str) -> None:
    env = started(SokobanEnv(), 0, "up")
    before = env.board
    message = f'Invalid action "{action}": the actions are up, down, left and right. Nothing changed.'
    rows = ["# # # # # #", "# _ _ _ _ #", "# . $ # _ #", "# @ _ _ _ #", "# _ _ _ _ #", "# # # # # #"]
    status = "You are at row 4, column 2. Boxes on targets: 0 of 1. Moves left: 58."
    assert_step(env, action, view(message, rows, status))
    assert env.board == before


def test_reset_refuses_unknown_tasks_and_step_needs_an_episode() -> None:
    env = SokobanEnv()
    assert_needs_an_episode(env, "up")
    assert_refuses_out_of_range(env.reset, "data_idx", 1300)


def test_parse_board_and_solve_refuse_what_they_cannot_read_or_solve() -> None:
    assert solve(parse_board(["# # # # #", "# @ $ . #", "# # # # #"])) == ["right"]
    assert solve(parse_board(["# # # # #", "# + $ _ #", "# # # # #"])) is None  # a box cannot be pulled
    assert solve(parse_board(["# # # # # #", "# @ * $ . #", "# # # # # #"])) is None  # nor two pushed at once
    for rows, message in [
        (["# @ x #"], "a board is rows of the cells"),
        (["# _ $ . #"], "one player"),
        (["# @ $ $ . #"], "as many targets as boxes"),
        ([], "a board is rows"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_board(rows)
    assert isinstance(parse_board(RULES_ROWS), Board)


# ---------------------------------------------------------------------- the expert, in process
def test_expert_reads_the_room_and_plays_test_tasks_in_process() -> None:
    from agentgym.sokoban.expert import SokobanExpert, read_board
    from openmanus_rl.experts import get_expert

    assert read_board(TASK0_OBS) == level(0)
    assert read_board("You moved up.") is None and read_board(view("x", ["# @ $ #"], "")) is None
    expert = get_expert("sokoban")
    assert isinstance(expert, SokobanExpert)
    env = SokobanEnv()
    for task_id in task_ids("test")[:40]:
        played = play_task(expert, env, task_id, 60)
        assert (played.result.reward, played.actions) == (1.0, oracle(task_id)), task_id


def test_expert_replies_in_each_template_and_noise_only_adds_detours() -> None:
    from openmanus_rl.agent.templates import get_action_template
    from openmanus_rl.experts import get_expert, reply

    expert = get_expert("sokoban")
    expert.reset(seed=0)
    env = SokobanEnv()
    react = reply(expert, env.reset(1), "react", SPEC)
    assert react == "Thought: I walk down to get into position; my plan has 9 more moves after this one.\nAction: down"
    observation = env.step("right").observation  # not the planned move: the expert solves again
    xml = reply(expert, observation, "xml", SPEC)
    assert xml == (
        "<think>I walk left to get into position; my plan has 10 more moves after this one.</think>\n"
        "<action>left</action>"
    )
    assert get_action_template("xml").parse(xml, SPEC).action == "left"
    expert.reset(seed=0)
    env.reset(1)
    thoughts = []
    for move in oracle(1):
        expert.act(env.observation)
        thoughts.append(expert.last_thought)
        env.step(move)
    assert thoughts[-2:] == [
        "I push a box up; my plan has 1 more move to put every box on a target.",
        "I push the last box up onto its target.",
    ]
    assert expert.act("You moved up.") == "up" and expert.last_thought == "I cannot see the room, so I try moving up."
    assert expert.act(view("x", ["# # # # #", "# + $ _ #", "# # # # #"], "")) == "up"
    assert expert.last_thought == "I see no way to put every box on a target, so I try moving up."

    noisy = get_expert("sokoban", noise=1.0, seed=0, max_steps=14)
    played = play(env, noisy.act, env.reset(1), 14)
    said = played.first_lines
    # the solution takes 10 moves, so 14 allow 4 detours (walks, never pushes) while the room stays solvable in time
    assert (played.result.reward, len(played.actions)) == (1.0, 14)
    assert not any("Nothing changed" in line for line in said)
    assert sum(line.startswith("You pushed") for line in said) == sum(
        m.startswith("You pushed") for m in _played(oracle(1))
    )
    assert_noise_refused("sokoban", 2)


def _played(actions: list[str]) -> list[str]:
    """The first observation line of each of ``actions`` played on task 1."""
    env = SokobanEnv()
    env.reset(1)
    return [env.step(a).observation.split("\n")[0] for a in actions]


# ---------------------------------------------------------------------- over HTTP


server = server_of("sokoban")


@pytest.mark.slow
def test_literal_protocol_exchange() -> None:
    with own_server("sokoban") as u:
        assert call(u, "POST", "/create") == episode_answer(TASK0_OBS)
        assert call(u, "POST", "/reset", {"id": 0, "data_idx": 1}) == episode_answer(TASK1_OBS)
        walled = view(
            "You cannot move up: a wall is there. Nothing changed.",
            TASK1_ROWS,
            "You are at row 2, column 2. Boxes on targets: 0 of 1. Moves left: 59.",
        )
        assert call(u, "POST", "/step", {"id": 0, "action": "up"}) == step_answer(walled)
        answers = [call(u, "POST", "/step", {"id": 0, "action": a}) for a in oracle(1)]
        assert [(a["reward"], a["done"]) for a in answers] == [(0.0, False)] * 9 + [(1.0, True)]
        below_the_box = view(
            "You moved right.",
            [
                "# # # # # # #",
                "# _ _ _ . _ #",
                "# _ # _ _ _ #",
                "# _ _ _ _ _ #",
                "# _ _ _ $ _ #",
                "# _ _ _ @ _ #",
                "# # # # # # #",
            ],
            "You are at row 6, column 5. Boxes on targets: 0 of 1. Moves left: 52.",
        )
        assert answers[-4] == step_answer(below_the_box)
        won = view(
            "You pushed a box up onto a target. Every box is on a target.",
            [
                "# # # # # # #",
                "# _ _ _ * _ #",
                "# _ # _ @ _ #",
                "# _ _ _ _ _ #",
                "# _ _ _ _ _ #",
                "# _ _ _ _ _ #",
                "# # # # # # #",
            ],
            "You are at row 3, column 5. Boxes on targets: 1 of 1. Moves left: 49. The episode is over.",
        )
        assert answers[-1] == step_answer(won, 1.0, True)
        assert call(u, "GET", "/observation", params={"id": 0}) == won
        assert call(u, "POST", "/step", {"id": 0, "action": "up"}, status=409) == {
            "error": "episode is done: POST /reset to start a new one"
        }
        assert_closes_the_only_env(u)
        assert call(u, "POST", "/create") == episode_answer(TASK1_OBS, env_id=1)


@pytest.mark.slow
def test_expert_over_http_solves_test_tasks(server: str) -> None:
    from openmanus_rl.experts import evaluate_expert

    ids = task_ids("test")[::8]  # 25 tasks, both room sizes and box counts
    score = evaluate_expert("sokoban", "test", len(ids), server, task_ids=ids, max_turns=60)
    assert (score.n, score.successes, score.rewards) == (25, [True] * 25, [1.0] * 25)
    # one turn per move of a shortest solution: no failed action, no extra turn
    assert score.steps == [len(oracle(i)) for i in ids]
