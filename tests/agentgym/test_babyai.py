"""BabyAI: levels and splits, the game on minigrid (view in words, high-level actions, refusals, reward), path
finding, the oracle and the expert in process, and the family-B protocol of a real server (literal exchange, the
expert over HTTP)."""

from __future__ import annotations

import episode_play
import gymnasium
import pytest
from game_checks import assert_noise_refused, assert_split_ids
from json_call import assert_closes_the_only_env, call, own_server, server_of, step_answer
from task0_views import TASK0_OBS, TASK0_TURNED, TASK0_WON

from agentgym.babyai.data import LEVELS, NUM_TASKS, gym_id, task_ids, task_level, task_list
from agentgym.babyai.env import BabyAIEnv, normalize
from agentgym.babyai.plan import FORWARD, LEFT, RIGHT, Reach, play
from agentgym.babyai.view import Thing, thing_sentence, where
from agentgym.open_envs import EpisodeStateError, InvalidRequestError
from agentgym.registry import get_env_spec

SPEC = get_env_spec("babyai")
# task 26 (UnlockPickupDist, seed 0): a locked green door on the left, a wall ahead, its key behind
TASK26_VIEW = "\n".join(
    [
        "Your goal: pick up the purple box",
        "There is a locked green door 1 1 steps to your left.",
        "There is a wall directly in front of you.",
        "You are not carrying anything.",
        'Available actions: ["turn left", "turn right", "go to green door 1", "check available actions"]',
    ]
)


def reward_for(env: BabyAIEnv) -> float:
    """Minigrid's success reward after the episode's low-level steps so far."""
    return 1 - 0.9 * (env.gym.step_count / env.gym.max_steps)


# ---------------------------------------------------------------------- levels and splits
def test_levels_splits_and_task_ids_are_stable() -> None:
    assert len(LEVELS) == 40 and len(set(LEVELS)) == 40 and NUM_TASKS == 4000
    assert (LEVELS[0], LEVELS[3], LEVELS[38], LEVELS[39]) == (
        "GoToRedBallGrey",
        "GoToObjS6",
        "BossLevel",
        "BossLevelNoUnlock",
    )
    import minigrid  # noqa: F401  (registers the ids)

    ids = [gym_id(i) for i in range(40)]
    assert all(i in gymnasium.registry for i in ids)
    assert [i for i in ids if not i.endswith("-v0")] == ["BabyAI-GoToObjS6-v1"]
    assert (task_level(0), task_level(41), task_level(3999)) == (
        ("GoToRedBallGrey", 0),
        ("GoToRedBall", 1),
        ("BossLevelNoUnlock", 99),
    )
    assert_split_ids(task_ids, range(200), range(200, 400), range(400, 4000))
    assert task_list("test")[:2] == [
        (0, "BabyAI level GoToRedBallGrey, seed 0"),
        (1, "BabyAI level GoToRedBall, seed 0"),
    ]
    assert task_list("dev")[0] == (200, "BabyAI level GoToRedBallGrey, seed 5")
    assert task_list("train")[-1] == (3999, "BabyAI level BossLevelNoUnlock, seed 99")
    with pytest.raises(ValueError, match=r"data_idx 4000 out of range: expected 0 <= data_idx < 4000"):
        task_level(4000)


# ---------------------------------------------------------------------- the game
def test_reset_describes_the_view_and_a_task_is_the_same_every_time(capsys: pytest.CaptureFixture[str]) -> None:
    env = BabyAIEnv()
    assert env.reset(0) == TASK0_OBS and env.observation == TASK0_OBS
    assert (env.reward, env.score, env.done) == (0.0, 0.0, False)
    assert env.reset(26) == TASK26_VIEW and env.reset(0) == TASK0_OBS and BabyAIEnv().reset(0) == TASK0_OBS
    raw = gymnasium.make(gym_id(10), disable_env_checker=True).unwrapped  # GoToObjDoor: rejects samples, seed 0
    raw.reset(seed=0)
    assert "Sampling rejected" in capsys.readouterr().out
    for task_id in (6, 10, 17):  # levels whose generation rejects samples with seed 0
        env.reset(task_id)
    assert capsys.readouterr().out == ""
    for task_id in (-1, 4000, 10**30):
        with pytest.raises(InvalidRequestError, match=rf"data_idx {task_id} out of range"):
            env.reset(task_id)
    with pytest.raises(EpisodeStateError, match="no episode yet"):
        BabyAIEnv().step("turn left")


def test_a_high_level_action_walks_a_shortest_way_and_success_pays_minigrids_reward() -> None:
    env = BabyAIEnv()
    env.reset(0)
    turned = env.step("turn left")
    assert (turned.observation, turned.reward, turned.extra["score"], turned.done) == (TASK0_TURNED, 0.0, 0.0, False)
    env.reset(0)
    won = env.step("  Go To RED ball 1. ")
    assert (won.observation, won.reward, won.extra["score"], won.done) == (TASK0_WON, 0.8875, 0.8875, True)
    assert env.gym.step_count == 8 and won.reward == reward_for(env)  # 8 low-level steps of 64
    with pytest.raises(EpisodeStateError, match="episode is done: POST /reset to start a new one"):
        env.step("turn left")


def test_keys_doors_and_carrying() -> None:
    env = BabyAIEnv()
    env.reset(26)
    script = [
        ("turn right", "You turned right."),
        ("turn right", "You turned right."),
        ("pick up green key 1", "You picked up green key 1."),
        ("turn right", "You turned right."),
        ("toggle", "You unlocked green door 1."),
        ("go through green door 1", "You stepped into green door 1; the cell beyond it is not free."),
    ]
    for action, message in script:
        result = env.step(action)
        assert (result.observation.split("\n")[0], result.reward, result.done) == (message, 0.0, False), action
    assert result.observation.split("\n")[1:] == [
        "Your goal: pick up the purple box",
        "There is a yellow ball 1 1 steps in front of you.",
        "There is a green ball 1 2 steps in front of you and 2 steps to your left.",
        "There is a purple box 1 3 steps in front of you and 3 steps to your left.",
        "There are walls directly to your left and to your right.",
        "You are carrying a green key.",
        'Available actions: ["turn left", "turn right", "go to yellow ball 1", "check available actions"]',
    ]
    assert env.step("drop").observation.startswith(
        "You cannot drop: the cell in front of you is not empty. Nothing changed.\n"
    )
    assert env.gym.step_count == 6 and tuple(env.gym.agent_pos) == (5, 4)


REFUSED = [
    ("move forward", "You cannot move forward: the way ahead is blocked. Nothing changed."),
    (
        "toggle and go through green door 1",
        "You cannot toggle and go through green door 1: it is locked and you are not carrying a green key. "
        "Nothing changed.",
    ),
    ("go through green door 1", "You cannot go through green door 1: it is locked; toggle it first. Nothing changed."),
    ("toggle", "You cannot toggle: there is no door or box in front of you. Nothing changed."),
    ("drop", "You cannot drop: you are not carrying anything. Nothing changed."),
    ("pickup green door 1", "You cannot pickup green door 1: a door cannot be picked up. Nothing changed."),
    ("go to purple box 1", "You cannot go to purple box 1: you see no purple box 1 now. Nothing changed."),
    ("jump", 'Invalid action "jump": choose one of the available actions. Nothing changed.'),
    ("", 'Invalid action "": choose one of the available actions. Nothing changed.'),
    ("go to green door", 'Invalid action "go to green door": choose one of the available actions. Nothing changed.'),
    ("turn around", 'Invalid action "turn around": choose one of the available actions. Nothing changed.'),
    (
        "check available actions",
        "You can take the following actions: turn left, turn right, go to green door 1, check available actions.",
    ),
]


@pytest.mark.parametrize("action,message", REFUSED)
def test_an_invalid_or_unavailable_action_changes_nothing_and_says_so(action: str, message: str) -> None:
    env = BabyAIEnv()
    env.reset(26)
    result = env.step(action)
    assert (result.observation, result.reward, result.extra["score"], result.done) == (
        message + "\n" + TASK26_VIEW,
        0.0,
        0.0,
        False,
    )
    assert (env.gym.step_count, tuple(env.gym.agent_pos), env.gym.agent_dir, env.gym.carrying) == (0, (4, 4), 1, None)


def test_running_out_of_steps_ends_the_episode_without_reward() -> None:
    env = BabyAIEnv()
    env.reset(3)  # GoToObjS6: 36 steps
    results = [env.step("turn left") for _ in range(36)]
    assert [r.done for r in results] == [False] * 35 + [True]
    assert results[-1].observation.startswith("You turned left. You ran out of steps. The episode is over.\n")
    assert (results[-1].reward, results[-1].extra["score"]) == (0.0, 0.0)


def test_text_helpers() -> None:
    assert normalize("  Pick Up the  Red Ball 1. ") == "pickup the red ball 1"
    assert (where(2, 0), where(0, -1), where(1, 3)) == (
        "2 steps in front of you",
        "1 steps to your left",
        "1 steps in front of you and 3 steps to your right",
    )
    assert thing_sentence(Thing("grey key 1", "key", "grey", None, (0, 0), 1, -1)) == (
        "There is a grey key 1 1 steps in front of you and 1 steps to your left."
    )
    assert thing_sentence(Thing("red door 2", "door", "red", "open", (0, 0), 3, 0)) == (
        "There is an open red door 2 3 steps in front of you."
    )


def test_reach_finds_shortest_ways_over_passable_cells_only() -> None:
    free = {(1, 1), (2, 1), (3, 1), (3, 2)}
    reach = Reach(lambda x, y: (x, y) in free, (1, 1, 0))  # at (1, 1) facing +x
    assert reach.path_to_face((4, 1)) == [FORWARD, FORWARD]
    assert reach.path_to_face((3, 3)) == [FORWARD, FORWARD, RIGHT, FORWARD]
    assert reach.path_to_face((2, 1)) == []
    assert reach.path_to_face((1, 0)) == [LEFT]
    assert reach.path_to_face((9, 9)) is None
    assert Reach(lambda x, y: False, (1, 1, 0), [(1, 2)]).path_to_face((1, 2)) == [RIGHT]


# ---------------------------------------------------------------------- the oracle
def test_oracle_solves_the_test_tasks_it_can_with_minigrids_reward() -> None:
    env, solved, unsolved = BabyAIEnv(), [], []
    for task_id in task_ids("test")[:40]:  # every level, seed 0
        actions, results = play(env, task_id)
        if results and results[-1].done and results[-1].reward > 0:
            assert results[-1].reward == reward_for(env) == results[-1].extra["score"], task_id
            assert [r.reward for r in results[:-1]] == [0.0] * (len(results) - 1), task_id
            assert results[-1].observation.split("\n")[0].endswith("You completed the mission. The episode is over.")
            solved.append(task_id)
        else:
            unsolved.append(task_id)
    # minigrid's bot gives up on PutNextS7N4Carrying and KeyInBox; OpenDoorsOrderN4Debug's "after you" mission
    # fails in minigrid itself (its strict check re-reads the first door's toggle against the second door)
    assert unsolved == [15, 22, 25] and len(solved) == 37
    actions, results = play(env, 12)  # OpenRedDoor
    assert actions == ["move forward", "turn left", "toggle"] and results[-1].reward == 0.946
    # UnlockToUnlock seed 4: minigrid's bot plans in circles after one turn; the oracle cuts that short
    actions, results = play(env, 188)
    assert (actions, [r.done for r in results]) == (["turn right"], [False])


# ---------------------------------------------------------------------- the expert, in process
def test_expert_reads_the_mission_and_the_view() -> None:
    from agentgym.babyai.expert import Desc, Step, parse_mission, read_view

    assert parse_mission(
        "put the red box next to a grey door and open a purple door after you pick up a key and go to the yellow box"
    ) == [
        Step("pick up", Desc(None, "key", None)),
        Step("go to", Desc("yellow", "box", None)),
        Step("put", Desc("red", "box", None), Desc("grey", "door", None)),
        Step("open", Desc("purple", "door", None)),
    ]
    assert parse_mission("open the red door, then pick up a ball on your left") == [
        Step("open", Desc("red", "door", None)),
        Step("pick up", Desc(None, "ball", "left")),
    ]
    assert parse_mission("pick up the red object") == [Step("pick up", Desc("red", None, None))]
    assert parse_mission("dance") == []
    view = read_view(TASK26_VIEW)
    assert view is not None and (view.event, view.mission, view.carrying) == (None, "pick up the purple box", None)
    assert [(t.label, t.state, t.front, t.right) for t in view.things] == [("green door 1", "locked", 0, -1)]
    assert view.actions == ["turn left", "turn right", "go to green door 1", "check available actions"]
    assert read_view("no goal here") is None


def test_expert_plays_the_first_40_test_tasks_in_process() -> None:
    from agentgym.babyai.expert import BabyAIExpert
    from openmanus_rl.experts import get_expert

    expert, env, failed = get_expert("babyai"), BabyAIEnv(), []
    assert isinstance(expert, BabyAIExpert)
    for task_id in task_ids("test")[:40]:
        reward = episode_play.play_task(expert, env, task_id, 150).result.reward
        if reward > 0:
            assert reward == reward_for(env), task_id
        else:
            failed.append(task_id)
    # GoToImpUnlock, Open, UnblockPickup and Unlock run out of steps in their mazes; see the oracle test for 15
    assert failed == [6, 11, 15, 17, 23, 37]


def test_expert_replies_in_each_template_and_noise_only_changes_the_pace() -> None:
    from openmanus_rl.agent.templates import get_action_template
    from openmanus_rl.experts import get_expert, reply

    expert = get_expert("babyai")
    react = reply(expert, TASK0_OBS, "react", SPEC)
    assert react == "Thought: I see the red ball I must reach: red ball 1; I go to it.\nAction: go to red ball 1"
    expert.reset(seed=26)
    xml = reply(expert, TASK26_VIEW, "xml", SPEC)
    assert xml == "<think>I do not see the purple box, so I turn to look around.</think>\n<action>turn left</action>"
    assert get_action_template("xml").parse(xml, SPEC).action == "turn left"
    assert expert.act("garbage") == "check available actions"

    noisy, env = get_expert("babyai", noise=0.5, seed=1), BabyAIEnv()
    played = episode_play.play(env, noisy.act, env.reset(21), 60)  # PutNextLocalS6N4
    assert played.result.reward > 0 and len(played.actions) > 14  # the noiseless expert takes 14 actions
    assert_noise_refused("babyai", 2)


# ---------------------------------------------------------------------- over HTTP


server = server_of("babyai")


def test_literal_protocol_exchange() -> None:
    with own_server("babyai") as u:
        assert call(u, "POST", "/create") == {"id": 0}
        no_episode = {"error": "no episode yet: POST /reset first"}
        assert call(u, "GET", "/observation", params={"id": 0}, status=409) == no_episode
        assert call(u, "POST", "/step", {"id": 0, "action": "turn left"}, status=409) == no_episode
        fresh = step_answer(TASK0_OBS, score=0.0, deleted=False)
        assert call(u, "POST", "/reset", {"id": 0, "data_idx": 0}) == fresh
        turned = step_answer(TASK0_TURNED, score=0.0)
        assert call(u, "POST", "/step", {"id": 0, "action": "turn left"}) == turned
        assert call(u, "GET", "/observation", params={"id": 0}) == {**turned, "deleted": False}
        assert call(u, "POST", "/reset", {"id": 0}) == fresh  # data_idx defaults to 0
        won = step_answer(TASK0_WON, 0.8875, True, score=0.8875)
        assert call(u, "POST", "/step", {"id": 0, "action": "go to red ball 1"}) == won
        assert call(u, "GET", "/observation", params={"id": 0}) == {**won, "deleted": False}
        assert call(u, "POST", "/step", {"id": 0, "action": "turn left"}, status=409) == {
            "error": "episode is done: POST /reset to start a new one"
        }
        assert_closes_the_only_env(u)
        assert call(u, "POST", "/create", {"ignored": True}) == {"id": 1}


def test_expert_over_http_solves_test_tasks(server: str) -> None:
    from openmanus_rl.experts import evaluate_expert

    score = evaluate_expert("babyai", "test", 12, server, task_ids=list(range(12)), max_turns=60)
    assert score.successes == [True] * 6 + [False] + [True] * 4 + [False]
    assert score.rewards == [
        0.8875,
        0.8875,
        0.9015625,
        0.925,
        0.9578125,
        0.8877551020408163,
        0.0,
        0.829,
        0.9296875,
        0.9897959183673469,
        0.9953125,
        0.0,
    ]
    assert score.steps == [1, 1, 1, 1, 1, 23, 60, 9, 1, 1, 1, 60]
