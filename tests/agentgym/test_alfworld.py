"""ALFWorld on the real engine: generated games and splits, the planner's plan as oracle, the game's rules and
messages, the expert in process, and the family-B protocol of a real server (literal exchange, ALFWorld's own bad
input, the expert over HTTP, 32 episodes at once; memory over many envs: test_all_envs.py).  Loading a game costs the
engine about a second."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from typing import Any

import json_call
import pytest
from episode_play import assert_step, assert_wins_at_the_end, play
from game_checks import assert_noise_refused, assert_split_ids
from task0_views import AT_SIDETABLE2, AT_TVSTAND, GO_TO, HOLDING, ROOM1, START1
from waiting import wait_until

from agentgym.alfworld.data import GameFolder, generated_game, task_ids, task_list
from agentgym.alfworld.env import AlfWorldEnv, StepsFirstLock, normalize
from agentgym.alfworld.generate import TASK_TYPES, generate
from agentgym.alfworld.plan import oracle
from agentgym.open_envs import EpisodeStateError, InvalidRequestError
from agentgym.registry import get_env_spec

SPEC = get_env_spec("alfworld")


def shown(text: str, actions: list[str]) -> str:
    return f"{text}\nAVAILABLE ACTIONS: {', '.join(actions)}"


def answer(text: str, actions: list[str], reward: float = 0.0, done: bool = False) -> dict[str, Any]:
    """ALFWorld's ``/step`` answer: ``text`` with ``actions`` shown, and ``actions`` as its available actions."""
    return json_call.step_answer(shown(text, actions), reward, done, available_actions=actions)


# ---------------------------------------------------------------------- games and splits
def test_splits_are_disjoint_complete_and_stable() -> None:
    assert_split_ids(task_ids, range(300), range(300, 600), range(600, 3600))
    assert task_list("test")[:6] == [
        (0, "put some keychain on drawer"),
        (1, "look at laptop under the floorlamp"),
        (2, "put a clean potato in diningtable"),
        (3, "heat some potato and put it in diningtable"),
        (4, "put a cool bread in countertop"),
        (5, "put two laptop in sidetable"),
    ]
    assert task_list("dev")[0] == (300, "put a keychain in shelf")
    assert task_list("train")[-1] == (3599, "find two cd and put them in dresser")


def test_a_task_id_gives_the_same_game_every_time() -> None:
    task = generate(1)
    assert (task.task_type, task.scene, task.goal, task.object_target, task.parent_target, task.toggle_target) == (
        "look_at_obj_in_light",
        "FloorPlan211",
        "look at laptop under the floorlamp",
        "Laptop",
        "",
        "FloorLamp",
    )
    assert generate(1) == task and generated_game(1).source["pddl_problem"] == task.pddl_problem
    assert "Your task is to: look at laptop under the floorlamp." in generated_game(1).source["grammar"]
    assert [generate(i).task_type for i in range(12)] == list(TASK_TYPES) * 2  # task i: type i % 6
    for bad in (-1, 3600):
        with pytest.raises(ValueError, match=rf"game {bad} out of range: expected 0 <= game < 3600"):
            generated_game(bad)
    with pytest.raises(ValueError, match="no ALFWorld game"):
        GameFolder(".")  # a folder without game files


# ---------------------------------------------------------------------- the oracle and the rules
@pytest.mark.slow
def test_oracle_wins_twenty_test_tasks_with_reward_only_on_the_last_step() -> None:
    assert oracle(1) == ["go to sidetable 1", "take laptop 1 from sidetable 1", "go to tvstand 1", "use floorlamp 1"]
    ids = [i for i in range(21) if i != 11]  # task 11's plan takes the planner ~20 s
    env, lengths = AlfWorldEnv(), []
    try:
        for task_id in ids:
            env.reset(task_id, plan=True)
            results = assert_wins_at_the_end(env, env.plan, task_id)
            lengths.append(len(results))
    finally:
        env.close()
    assert lengths == [5, 4, 7, 6, 6, 8, 4, 4, 6, 7, 6, 5, 4, 7, 6, 7, 9, 4, 4, 6]


@pytest.mark.slow
def test_a_process_that_closed_two_open_engines_exits_cleanly() -> None:
    """Fast Downward's library copies share one plugin registry: unloading one made the process crash at exit."""
    script = (
        "from agentgym.alfworld.data import generated_game\n"
        "from agentgym.alfworld.env import Engine\n"
        "first, second = Engine(), Engine()\n"
        "first.reset(generated_game(0)); second.reset(generated_game(1))\n"
        "libraries = {first.pddl.downward_lib._handle, second.pddl.downward_lib._handle}\n"
        "first.close(); second.close()\n"
        "again = Engine()\n"
        "assert again.pddl.downward_lib._handle in libraries and len(libraries) == 2\n"
        "print('reused', again.loaded.game_id)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (0, "reused 1\n"), done.stderr[-2000:]


def test_invalid_actions_change_nothing_and_say_so() -> None:
    env = AlfWorldEnv(max_steps=6)
    with pytest.raises(EpisodeStateError, match="no episode yet: POST /reset first"):
        env.step("look")
    for bad in (-1, 3600, 10**30):
        with pytest.raises(InvalidRequestError, match=rf"invalid request: game {bad} out of range"):
            env.reset(bad)
    try:
        first = env.reset(1)
        assert first == {
            "observation": shown(ROOM1, START1),
            "available_actions": START1,
            "task_type": "look_at_obj_in_light",
            "reward": 0.0,
            "done": False,
        }
        nothing = env.step("  Fly to the   moon ")
        assert (nothing.observation, nothing.reward, nothing.done, nothing.extra["available_actions"]) == (
            shown('Nothing happens: "Fly to the moon" is not one of the available actions.', START1),
            0.0,
            False,
            START1,
        )
        arrived = env.step("Go to sidetable 2.")  # case and a final full stop are ignored
        assert arrived.observation == shown(
            "You arrive at sidetable 2. On the sidetable 2, you see a box 1, a cellphone 2, and a laptop 2.",
            AT_SIDETABLE2,
        )
        assert env.step("take laptop 9 from sidetable 2").extra["available_actions"] == AT_SIDETABLE2  # nothing changed
        env.step("take laptop 2 from sidetable 2")
        put = env.step("put laptop 2 in/on sidetable 2")  # AgentGym's wording of the engine's "move ... to ..."
        assert put.observation == shown("You move the laptop 2 to the sidetable 2.", AT_SIDETABLE2)
        assert_step(
            env,
            "jump",
            shown(
                'Nothing happens: "jump" is not one of the available actions. You have used all 6 actions.',
                AT_SIDETABLE2,
            ),
            0.0,
            True,
        )
        with pytest.raises(EpisodeStateError, match="episode is done: POST /reset to start a new one"):
            env.step("look")
    finally:
        env.close()
    assert normalize("Put mug 1 on shelf 2.", []) == "move mug 1 to shelf 2"
    assert normalize("put mug 1 in shelf 2", ["put mug 1 in shelf 2"]) == "put mug 1 in shelf 2"


def test_a_waiting_step_takes_the_engines_before_waiting_resets() -> None:
    """Three resets and two steps queue behind a reset that holds the engines: on release both steps run, then the
    resets, whatever order they arrived in."""
    import threading

    lock, order = StepsFirstLock(), []

    def call(name: str, step: bool) -> None:
        with lock.hold(step=step):
            order.append(name)

    def waiting(steps: int, resets: int) -> None:
        want = {"step": steps, "reset": resets}
        wait_until(lambda: lock._waiting == want, f"{want} waiting (now {lock._waiting})", 10.0, poll_s=0.001)

    threads = []
    with lock.hold(step=False):
        for number, (name, step) in enumerate(
            [("reset a", False), ("step a", True), ("reset b", False), ("step b", True), ("reset c", False)]
        ):
            threads.append(threading.Thread(target=call, args=(name, step)))
            threads[-1].start()
            waiting(steps=(number + 1) // 2, resets=number // 2 + 1)
    for thread in threads:
        thread.join(10.0)
    assert sorted(order[:2]) == ["step a", "step b"] and sorted(order[2:]) == ["reset a", "reset b", "reset c"]
    assert lock._waiting == {"step": 0, "reset": 0}
    with lock.hold(step=True):  # free again
        pass


# ---------------------------------------------------------------------- the expert, in process
def test_expert_reads_the_observations() -> None:
    from agentgym.alfworld.expert import available_actions, read_task, split_list

    assert read_task("put a clean mug in coffeemachine") == ("clean", "mug", "coffeemachine")
    assert read_task("find two cd and put them in dresser") == ("two", "cd", "dresser")
    assert read_task("examine the book with the desklamp") == ("look", "book", "desklamp")
    assert read_task("put some keychain on drawer") == ("place", "keychain", "drawer")
    assert read_task("dance") is None
    assert split_list("a box 1, a cellphone 2, and a laptop 2") == ["box 1", "cellphone 2", "laptop 2"]
    assert split_list("nothing") == []
    assert available_actions(shown(ROOM1, START1)) == START1 and available_actions("no list") == []


@pytest.mark.slow
def test_expert_wins_twenty_test_tasks_in_process() -> None:
    from agentgym.alfworld.expert import AlfWorldExpert
    from openmanus_rl.experts import get_expert

    expert = get_expert("alfworld")
    assert isinstance(expert, AlfWorldExpert)
    env, steps = AlfWorldEnv(), []
    try:
        for task_id in range(20):
            expert.reset(seed=task_id)
            played = play(env, expert.act, env.reset(task_id)["observation"], 50)
            assert played.result.reward == 1.0, task_id
            steps.append(len(played.actions))
    finally:
        env.close()
    assert steps == [12, 12, 13, 8, 6, 8, 4, 5, 9, 14, 7, 44, 8, 6, 7, 10, 10, 9, 4, 9]


def test_expert_replies_in_each_template_and_noise_takes_detours() -> None:
    from openmanus_rl.experts import get_expert, reply

    expert = get_expert("alfworld")
    react = reply(expert, shown(ROOM1, START1), "react", SPEC)
    assert react == ("Thought: I look for a laptop. I have not checked the armchair 1 yet.\nAction: go to armchair 1")
    at = shown(
        "You arrive at sidetable 2. On the sidetable 2, you see a box 1, a cellphone 2, and a laptop 2.", AT_SIDETABLE2
    )
    assert reply(expert, at, "xml", SPEC) == (
        "<think>I take the laptop 2 I see here.</think>\n<action>take laptop 2 from sidetable 2</action>"
    )
    fresh = get_expert("alfworld")
    assert fresh.act("You arrive at sofa 1.") == "look"
    assert fresh.last_thought == "I do not know the task yet, so I look around."
    noisy = get_expert("alfworld", noise=1.0, seed=3)
    assert noisy.act(shown(ROOM1, START1)) in GO_TO and noisy.last_thought.startswith("I take a detour: go to ")
    assert_noise_refused("alfworld", 2)


# ---------------------------------------------------------------------- over HTTP
call = partial(json_call.call, timeout_s=120)  # the engine may load a game first


server = json_call.server_of("alfworld")


@pytest.mark.slow
def test_literal_protocol_exchange() -> None:
    with json_call.own_server("alfworld", timeout_s=120) as u:
        assert call(u, "POST", "/create") == {"id": 0}
        assert call(u, "POST", "/step", {"id": 0, "action": "look"}, status=409) == {
            "error": "no episode yet: POST /reset first"
        }
        assert call(u, "POST", "/reset", {"id": 0, "game": 1, "world_type": "Text"}) == json_call.episode_answer(
            shown(ROOM1, START1), available_actions=START1, task_type="look_at_obj_in_light"
        )
        arrived = "You arrive at sidetable 2. On the sidetable 2, you see a box 1, a cellphone 2, and a laptop 2."
        assert call(u, "POST", "/step", {"id": 0, "action": "go to sidetable 2"}) == answer(arrived, AT_SIDETABLE2)
        assert call(u, "GET", "/observation", params={"id": 0}) == shown(arrived, AT_SIDETABLE2)
        assert call(u, "POST", "/step", {"id": 0, "action": "take laptop 2 from sidetable 2"}) == answer(
            "You pick up the laptop 2 from the sidetable 2.", HOLDING
        )
        assert call(u, "POST", "/step", {"id": 0, "action": "fly to the moon"}) == answer(
            'Nothing happens: "fly to the moon" is not one of the available actions.', HOLDING
        )
        assert call(u, "GET", "/available_actions", params={"id": 0}) == HOLDING
        assert call(u, "POST", "/step", {"id": 0, "action": "go to tvstand 1"}) == answer(
            "You arrive at tvstand 1. On the tvstand 1, you see a floorlamp 1.", AT_TVSTAND
        )
        assert call(u, "POST", "/step", {"id": 0, "action": "use floorlamp 1"}) == answer(
            "You turn on the floorlamp 1.", AT_TVSTAND, 1.0, True
        )
        assert call(u, "POST", "/step", {"id": 0, "action": "look"}, status=409) == {
            "error": "episode is done: POST /reset to start a new one"
        }
        json_call.assert_closes_the_only_env(u, timeout_s=120)
        assert call(u, "POST", "/create", {"ignored": True}) == {"id": 1}


@pytest.mark.slow
def test_alfworlds_own_routes_and_fields_refuse_bad_input(server: str) -> None:
    env_id = call(server, "POST", "/create")["id"]
    assert call(server, "GET", "/observation", params={"id": env_id}, status=409) == {
        "error": "no episode yet: POST /reset first"
    }
    assert call(server, "POST", "/reset", {"id": env_id, "game": 0, "world_type": "Thor"}, status=422) == {
        "error": "invalid request: world_type: Input should be 'Text'"
    }
    assert call(server, "GET", "/available_actions", params={"id": "zero"}, status=422) == {
        "error": "invalid request: query.id: Input should be a valid integer, unable to parse string as an integer"
    }
    assert call(server, "POST", "/close", {"id": env_id}) is True


@pytest.mark.slow
def test_expert_over_http_solves_test_tasks(server: str) -> None:
    from openmanus_rl.experts import evaluate_expert

    ids = [0, 1, 4, 7]
    score = evaluate_expert("alfworld", "test", len(ids), server, task_ids=ids, max_turns=50, request_timeout_s=120)
    assert (score.n, score.successes, score.rewards) == (4, [True] * 4, [1.0] * 4)
    assert score.steps == [12, 12, 6, 5]


@pytest.mark.slow
def test_thirty_two_episodes_at_once_all_start_and_play(server: str) -> None:
    """The server loads games one at a time (1-2 s each), so the last of 32 resets sent together waits far past
    the agent's 30 s request timeout; the client waits ALFWorld's ``reset_timeout_s`` for a reset instead.  Then the
    32 play 3 turns each at once (TextWorld's text generation shares one parser between engines: unserialised,
    concurrent steps answered 500)."""
    from concurrent.futures import ThreadPoolExecutor

    from openmanus_rl.envs import EnvClient, RetryPolicy

    spec = get_env_spec("alfworld")
    game_ids = list(range(100, 132))  # test games no other test loads

    def play(game_id: int) -> list[str]:
        client = EnvClient(spec, server, RetryPolicy(timeout_s=30.0, retries=0))
        client.create()
        try:
            seen = [client.reset(game_id)]
            for _ in range(3):  # the first action offered, each turn
                seen.append(client.step(seen[-1].rsplit("AVAILABLE ACTIONS: ", 1)[1].split(", ")[0]).observation)
            return seen
        finally:
            client.close()

    assert EnvClient(spec, server, RetryPolicy(timeout_s=30.0)).reset_timeout_s == 180.0
    with ThreadPoolExecutor(len(game_ids)) as pool:
        episodes = list(pool.map(play, game_ids))
    assert all("Your task is to: " in episode[0] for episode in episodes)
    assert all(len(episode) == 4 and all("\nAVAILABLE ACTIONS: " in text for text in episode) for episode in episodes)
    assert not any("Nothing happens" in text for episode in episodes for text in episode)  # every action was offered
