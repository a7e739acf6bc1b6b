"""SciWorld on the real ScienceWorld simulator (Java): tasks and splits against the jar, the gold-path oracle,
invalid actions, the family-B protocol of a real server (literal exchange, close ends the JVM; bad input and
closed envs are `test_env_http_contract`'s) and the expert over HTTP.  Every test here starts JVMs, so all are slow."""

from __future__ import annotations

from functools import partial
from typing import Iterator

import json_call
import psutil
import pytest

from agentgym.open_envs import EpisodeStateError, InvalidRequestError
from agentgym.sciworld.app import build_app
from agentgym.sciworld.data import NUM_TASKS, VARIATIONS, task, task_ids, task_list
from agentgym.sciworld.env import SciWorldEnv
from agentgym.sciworld.plan import oracle
from agentgym.spawn import serve_subprocess

pytestmark = pytest.mark.slow

BOIL_LEAD = (
    "Your task is to boil lead. For compounds without a boiling point, combusting the substance is also "
    "acceptable. First, focus on the substance. Then, take actions that will cause it to change its state "
    "of matter."
)
BATHROOM = (
    "This room is called the bathroom. In it, you see: \n\tthe agent\n\ta substance called air\n\ta bathtub, "
    "which is turned off. In the bathtub is: nothing.\n\ta glass cup (containing nothing)\n\ta picture\n\ta "
    "sink, which is turned off. In the sink is: nothing.\n\ta toilet. In the toilet is: A drain, which is "
    "open, a substance called water.\nYou also see:\n\tA door to the kitchen (that is closed)"
)
NO_MATCH = "No known action matches that input."
# task 21's reset answer, in process and over HTTP
TASK21_START = {
    "task_name": "boil",
    "var_num": 21,
    "task_description": BOIL_LEAD,
    "observation": BATHROOM,
    "reward": 0.0,
    "score": 0.0,
    "deleted": False,
    "done": False,
}


@pytest.fixture(scope="module")
def env() -> Iterator[SciWorldEnv]:
    game = SciWorldEnv()
    yield game
    game.close()


def test_splits_follow_scienceworld_and_match_the_jar(env: SciWorldEnv) -> None:
    assert NUM_TASKS == 4639 and len(VARIATIONS) == 23
    test, dev, train = task_ids("test"), task_ids("dev"), task_ids("train")
    assert (len(train), len(dev), len(test)) == (2312, 1156, 1171)
    assert set(train) | set(dev) | set(test) == set(range(NUM_TASKS))
    assert train[:3] == [0, 1, 2] and dev[:2] == [14, 15] and test[:2] == [21, 22]
    assert task_list("test")[0] == (21, "Changes of State (Boiling), variation 21")
    assert task(4638) == task(NUM_TASKS - 1) and task(4638).task_id == "8-2" and task(4638).variation == 9
    with pytest.raises(ValueError, match="data_idx 4639 out of range: expected 0 <= data_idx < 4639"):
        task(4639)
    sim = env.sim
    assert sorted(set(sim.get_task_names()) - {v[0] for v in VARIATIONS.values()}) == [
        "grow-fruit",
        "grow-plant",
        "inclined-plane-determine-angle",
        "inclined-plane-friction-named-surfaces",
        "inclined-plane-friction-unnamed-surfaces",
        "mendelian-genetics-known-plant",
        "mendelian-genetics-unknown-plant",
    ]  # the excluded tasks
    for task_id, (name, _, count, train_n, dev_n) in VARIATIONS.items():
        sim.load(name, 0, "")
        assert sim.get_max_variations(name) == count, task_id
        assert sim.get_variations_train() == list(range(train_n)), task_id
        assert sim.get_variations_dev() == list(range(train_n, train_n + dev_n)), task_id
        assert sim.get_variations_test() == list(range(train_n + dev_n, count)), task_id


def test_reset_step_and_invalid_actions(env: SciWorldEnv) -> None:
    assert env.reset(21) == TASK21_START
    for action in ("dance wildly", "", "open door to nowhere"):
        result = env.step(action)
        assert (result.observation, result.reward, result.extra["score"], result.done) == (NO_MATCH, 0.0, 0.0, False)
    assert env.step("look around").observation == BATHROOM  # nothing changed
    assert env.step("open door to kitchen").observation == "The door is now open."
    assert env.step("go to kitchen").observation == "You move to the kitchen."
    assert "look around" in env.action_hint() and env.task_description() == BOIL_LEAD
    with pytest.raises(InvalidRequestError, match="data_idx -1 out of range"):
        env.reset(-1)


def first_test_task_of_each_task() -> list[int]:
    firsts: dict[str, int] = {}
    for data_idx in task_ids("test"):
        firsts.setdefault(task(data_idx).task_id, data_idx)
    return list(firsts.values())


def test_the_oracle_reaches_100_on_the_first_test_variation_of_every_task(env: SciWorldEnv) -> None:
    ids = first_test_task_of_each_task()
    assert len(ids) == 23 and ids[:3] == [21, 51, 81]
    for data_idx in ids:
        path = oracle(env, data_idx)
        for action in path:
            result = env.step(action)
            if result.done:
                break
        assert (result.extra["score"], result.done) == (100.0, True), (data_idx, task(data_idx))
    with pytest.raises(EpisodeStateError, match="episode is done: POST /reset to start a new one"):
        env.step("look around")


def test_a_failed_task_ends_with_a_negative_score(env: SciWorldEnv) -> None:
    env.reset(task_ids("test")[0])  # boil lead: focusing on anything but the substance fails the task
    result = env.step("focus on air")
    assert result.done and result.extra["score"] < 0 and result.reward == result.extra["score"]


def test_bad_server_options_fail_at_start() -> None:
    with pytest.raises(ValueError, match=r"unknown ScienceWorld simplifications \['fast'\]"):
        build_app(simplifications="easy,fast")
    with pytest.raises(ValueError, match="max_steps must be at least 1, got 0"):
        build_app(max_steps=0)


# ---------------------------------------------------------------------- over HTTP
call = partial(json_call.call, timeout_s=60)  # a create starts a JVM


def jvms(pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "java"]


def test_literal_protocol_exchange_and_close_ends_the_jvm() -> None:
    with json_call.own_server("sciworld") as u:
        assert call(u, "POST", "/create") == {"id": 0}
        assert len(jvms(u.pid)) == 1
        assert call(u, "POST", "/step", {"id": 0, "action": "look around"}, status=409) == {
            "error": "no episode yet: POST /reset first"
        }
        assert call(u, "POST", "/reset", {"id": 0, "data_idx": 21}) == TASK21_START
        opened = json_call.step_answer("The door is now open.", score=0.0)
        assert call(u, "POST", "/step", {"id": 0, "action": "open door to kitchen"}) == opened
        no_match = json_call.step_answer(NO_MATCH, score=0.0)
        assert call(u, "POST", "/step", {"id": 0, "action": "fly away"}) == no_match
        assert call(u, "GET", "/observation", params={"id": 0}) == {**no_match, "deleted": False}
        assert call(u, "GET", "/task_description", params={"id": 0}) == BOIL_LEAD
        assert "go to kitchen" in call(u, "GET", "/action_hint", params={"id": 0})
        assert call(u, "POST", "/close", {"id": 0}) is True
        assert jvms(u.pid) == []  # close waited for the JVM to exit


def test_the_shipped_description_index_is_the_simulators(env: SciWorldEnv) -> None:
    """The expert's index ships for the pinned ScienceWorld: every variation listed once, and a sample of variations
    (every 97th) found under their own description's key."""
    import json
    from importlib.metadata import version

    from agentgym.sciworld.expert import SHIPPED_INDEX, description_index, description_key

    shipped = json.loads(SHIPPED_INDEX.read_text())
    assert shipped["scienceworld"] == version("scienceworld") == "1.2.3"
    assert description_index() == shipped["index"]  # used as shipped: nothing built or cached
    assert sorted(i for ids in shipped["index"].values() for i in ids) == list(range(NUM_TASKS))
    for data_idx in range(0, NUM_TASKS, 97):
        t = task(data_idx)
        env.sim.load(t.name, t.variation, "")
        assert data_idx in shipped["index"][description_key(str(env.sim.get_task_description()))], data_idx


def test_the_expert_recognises_the_task_and_wins_over_http() -> None:
    from openmanus_rl.experts import evaluate_expert

    ids = task_ids("test")[::59][:20]
    with serve_subprocess("sciworld", timeout_s=60) as url:
        score = evaluate_expert("sciworld", "test", len(ids), url, task_ids=ids, max_turns=100, request_timeout_s=60)
    assert ids[13] == 3188  # starts exactly like 3038 (next test)
    assert (score.n, score.successes) == (20, [True] * 20)
    assert score.rewards == [100.0] * 20


@pytest.mark.parametrize("data_idx", [3038, 3188])
def test_variations_that_start_alike_are_told_apart_by_a_later_observation(env: SciWorldEnv, data_idx: int) -> None:
    """3038 and 3188 (find a living thing) show the same task and the same first room; their gold paths part after
    the look around outside, which shows which one this is: the expert wins either, keeping only the right one."""
    from agentgym.registry import get_env_spec
    from agentgym.sciworld.expert import SciWorldExpert
    from openmanus_rl.envs.client import first_observation

    expert = SciWorldExpert()
    try:
        observation = first_observation(get_env_spec("sciworld"), env.reset(data_idx))
        assert expert.candidates(observation) == [3038, 3188]
        expert.reset()
        for _ in range(100):
            result = env.step(expert.act(observation))
            if result.done:
                break
            observation = result.observation
        assert result.done and result.extra["score"] == 100.0
        assert list(expert.gold) == [data_idx]
    finally:
        expert.close()


def test_a_server_that_stops_ends_the_jvms_of_its_open_envs() -> None:
    with serve_subprocess("sciworld", timeout_s=60) as u:
        assert [call(u, "POST", "/create") for _ in range(2)] == [{"id": 0}, {"id": 1}]
        children = jvms(u.pid)
        assert len(children) == 2
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert alive == [] and len(gone) == 2
