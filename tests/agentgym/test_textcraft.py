"""TextCraft: goal list and splits, the game's rules and messages, the oracle and the expert in process, and the
family-B protocol of a real server (literal exchange, create with a goal and its bad input, the expert over HTTP)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from episode_play import assert_step, assert_wins_at_the_end, play_task, started
from game_checks import assert_needs_an_episode, assert_noise_refused, assert_refuses_out_of_range
from json_call import assert_closes_the_only_env, call, episode_answer, own_server, server_of, step_answer

from agentgym.open_envs import EpisodeStateError, InvalidRequestError
from agentgym.registry import get_env_spec
from agentgym.textcraft.data import cookbook, task_ids, task_list
from agentgym.textcraft.env import TextCraftEnv, first_observation
from agentgym.textcraft.plan import NoPlan, oracle, plan

SPEC = get_env_spec("textcraft")
CRAFTING_TABLE = 183  # task id of "crafting table": its recipe takes the kind "planks"
CRAFTING_TABLE_OBS = "\n".join(
    [
        "Crafting commands:",
        "craft 4 oak planks using 1 oak logs",
        "craft 1 bookshelf using 6 planks, 3 book",
        "craft 4 spruce planks using 1 spruce logs",
        "craft 2 tripwire hook using 1 planks, 1 stick, 1 iron ingot",
        "craft 4 jungle planks using 1 jungle logs",
        "craft 1 loom using 2 planks, 2 string",
        "craft 1 jukebox using 8 planks, 1 diamond",
        "craft 1 beehive using 6 planks, 3 honeycomb",
        "craft 1 piston using 1 redstone, 4 cobblestone, 3 planks, 1 iron ingot",
        "craft 4 warped planks using 1 warped stems",
        "craft 1 blue bed using 3 blue wool, 3 planks",
        "craft 4 crimson planks using 1 crimson stems",
        "craft 1 wooden shovel using 2 stick, 1 planks",
        "craft 4 birch planks using 1 birch logs",
        "craft 4 dark oak planks using 1 dark oak logs",
        "craft 1 crafting table using 4 planks",
        "craft 1 gray bed using 3 gray wool, 3 planks",
        "craft 1 cartography table using 4 planks, 2 paper",
        "craft 4 acacia planks using 1 acacia logs",
        "",
        "Goal: craft crafting table.",
    ]
)
TASK0_OBS = "Crafting commands:\ncraft 4 acacia planks using 1 acacia logs\n\nGoal: craft acacia planks."


# ---------------------------------------------------------------------- goals and splits
def test_goal_list_is_upstreams_sorted_by_depth_and_built_once() -> None:
    book = cookbook()
    assert cookbook() is book
    assert len(book.goals) == 544
    assert Counter(book.depth[g] for g in book.goals) == {1: 125, 2: 291, 3: 117, 4: 11}
    assert [book.depth[g] for g in book.goals] == sorted(book.depth[g] for g in book.goals)
    assert book.goals[:3] == ("acacia planks", "acacia wood", "beacon")
    assert book.goals[-1] == "purple banner" and book.goals[CRAFTING_TABLE] == "crafting table"
    # the cycle iron ingot <-> iron nugget keeps the recipe read first in sorted file order
    assert [r.command for r in book.recipes["iron ingot"]] == ["craft 1 iron ingot using 9 iron nugget"]
    assert "iron nugget" in book.base and "iron nugget" not in book.recipes
    assert book.kinds["planks"][:2] == ("acacia planks", "birch planks") and book.kind_of["oak planks"] == "planks"


def test_splits_are_disjoint_complete_and_stable() -> None:
    test, dev, train = task_ids("test"), task_ids("dev"), task_ids("train")
    assert (len(test), len(dev), len(train)) == (100, 50, 394)
    assert sorted(test + dev + train) == list(range(544))
    assert test[:10] == [15, 17, 21, 22, 24, 26, 43, 44, 56, 58]
    assert dev[:5] == [1, 27, 28, 49, 57] and train[:5] == [0, 2, 3, 4, 5]
    assert task_list("test")[:3] == [(15, "craft brown dye"), (17, "craft clay"), (21, "craft cobblestone stairs")]
    assert Counter(cookbook().depth[cookbook().goals[i]] for i in test) == {1: 21, 2: 65, 3: 13, 4: 1}
    with pytest.raises(ValueError, match="unknown split 'val'"):
        task_ids("val")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- the game
def test_first_observation_lists_needed_recipes_and_distractors_deterministically() -> None:
    book = cookbook()
    assert first_observation(book, "crafting table") == CRAFTING_TABLE_OBS
    assert TextCraftEnv(book).reset(0) == TASK0_OBS
    lines = CRAFTING_TABLE_OBS.split("\n")[1:-2]
    needed = [
        line
        for line in lines
        if line == "craft 1 crafting table using 4 planks"
        or re.fullmatch(r"craft 4 [a-z ]+ planks using 1 [a-z ]+ (logs|stems)", line)
    ]
    distractors = [line for line in lines if line not in needed]
    assert (len(needed), len(distractors)) == (9, 10)  # the goal's recipe, the 8 planks recipes; 10 distractors
    assert all(re.search(r"\d planks", line) for line in distractors)  # each takes an ingredient of the goal


def test_oracle_solves_every_task_with_reward_only_on_the_last_step() -> None:
    env = TextCraftEnv(cookbook())
    assert oracle(CRAFTING_TABLE) == [
        "get 1 acacia logs",
        "craft 4 acacia planks using 1 acacia logs",
        "craft 1 crafting table using 4 acacia planks",
    ]
    lengths = []
    for task_id in range(544):
        env.reset(task_id)
        actions = oracle(task_id)
        results = assert_wins_at_the_end(env, actions, task_id)
        assert not any(r.observation.startswith("Could not") for r in results), task_id
        lengths.append(len(actions))
    assert (min(lengths), max(lengths)) == (2, 48)


def test_a_play_with_every_kind_of_action_and_message() -> None:
    env = started(TextCraftEnv(cookbook()), CRAFTING_TABLE)
    script = [
        ("inventory", "Inventory: You are not carrying anything."),
        ("  GET 2 Oak_Logs. ", "Got 2 oak logs"),
        ("craft 4 oak planks using 1 oak logs", "Crafted 4 oak planks"),
        ("craft oak planks using 1 oak logs", "Crafted 4 oak planks"),  # the count may be left out
        ("inventory", "Inventory: [oak planks] (8)"),
        ("craft 1 crafting table using 4 oak planks", "Crafted 1 crafting table"),
    ]
    for action, observation in script:
        result = env.step(action)
        assert result.observation == observation, action
    assert (result.reward, result.done, dict(env.inventory)) == (1.0, True, {"oak planks": 4, "crafting table": 1})
    with pytest.raises(EpisodeStateError, match=r"episode is done \(crafted crafting table\)"):
        env.step("inventory")
    assert env.reset(CRAFTING_TABLE) == CRAFTING_TABLE_OBS and not env.inventory and not env.done


INVALID = [
    (
        "dance",
        'Could not execute "dance": the actions are "get <count> <item>", '
        '"craft <count> <item> using <count> <item>, ..." and "inventory".',
    ),
    ("get oak logs", 'Could not execute "get oak logs": get takes "get <count> <item>", e.g. "get 2 stone".'),
    ("get 0 oak logs", "Could not get 0 oak logs: the count must be between 1 and 1000."),
    ("get 1001 oak logs", "Could not get 1001 oak logs: the count must be between 1 and 1000."),
    ("get 1 unobtainium", "Could not find unobtainium: there is no such item."),
    ("get 4 oak planks", "Could not get oak planks: it is crafted, not gathered; craft it with a crafting command."),
    ("get 4 planks", "Could not get planks: planks is a kind of item; name a specific one, such as acacia planks."),
    (
        "craft 1 crafting table",
        'Could not execute "craft 1 crafting table": a craft action is '
        '"craft <count> <item> using <count> <item>, ...".',
    ),
    (
        "craft 1 crafting table using oak planks",
        'Could not execute "craft 1 crafting table using oak planks": ingredient "oak planks" is not "<count> <item>".',
    ),
    (
        "craft 1 crafting table using 4 planks",
        "Could not craft crafting table: planks is a kind of item; name a specific one, such as acacia planks.",
    ),
    (
        "craft 4 planks using 1 oak logs",
        "Could not craft planks: planks is a kind of item; name a specific one, such as acacia planks.",
    ),
    ("craft 1 oak logs using 1 oak planks", "Could not craft oak logs: no crafting command makes it."),
    (
        "craft 1 crafting table using 3 oak planks",
        "Could not craft crafting table: no crafting command for crafting table uses 3 oak planks.",
    ),
    (
        "craft 1 crafting table using 4 oak logs",
        "Could not craft crafting table: no crafting command for crafting table uses 4 oak logs.",
    ),
    (
        "craft 2 crafting table using 4 oak planks",
        "Could not craft 2 crafting table: this crafting command makes 1 crafting table.",
    ),
    (
        "craft 1 crafting table using 4 oak planks",
        "Could not find enough items to craft crafting table: it takes 4 oak planks and you have 2.",
    ),
]


@pytest.mark.parametrize(("action", "message"), INVALID, ids=[a for a, _ in INVALID])
def test_an_invalid_action_changes_nothing_and_says_why(action: str, message: str) -> None:
    env = started(TextCraftEnv(cookbook()), CRAFTING_TABLE)
    env.inventory.update({"oak planks": 2, "oak logs": 1})
    before = env.step("inventory").observation
    assert before == "Inventory: [oak planks] (2) [oak logs] (1)"
    assert_step(env, action, message)
    assert env.step("inventory").observation == before


def test_reset_and_start_refuse_unknown_tasks_and_goals() -> None:
    env = TextCraftEnv(cookbook())
    assert_needs_an_episode(env, "inventory")
    assert_refuses_out_of_range(env.reset, "data_idx", 544)
    with pytest.raises(InvalidRequestError, match="goal 'oak logs' is not an item that a recipe makes"):
        env.start("oak logs")
    assert env.start("minecraft:Crafting_Table", "craft 1 crafting table using 4 planks") == (
        "Crafting commands:\ncraft 1 crafting table using 4 planks\n\nGoal: craft crafting table."
    )


def test_planner_refuses_a_goal_it_cannot_reach() -> None:
    from agentgym.textcraft.data import Recipe

    loop = {"a": [Recipe("a", 1, (("b", 1),))], "b": [Recipe("b", 1, (("a", 1),))]}
    with pytest.raises(NoPlan, match="no recipe for a can be followed"):
        plan("a", lambda name: loop.get(name, []))


# ---------------------------------------------------------------------- the expert, in process
def test_expert_reads_the_listing_and_plays_every_task_in_process() -> None:
    from agentgym.textcraft.expert import TextCraftExpert, read_commands
    from openmanus_rl.experts import get_expert

    recipes, goal = read_commands(CRAFTING_TABLE_OBS)
    assert goal == "crafting table" and len(recipes) == 19
    assert recipes[1].command == "craft 1 bookshelf using 6 planks, 3 book"
    expert = get_expert("textcraft")
    assert isinstance(expert, TextCraftExpert)
    env = TextCraftEnv(cookbook())
    for task_id in range(544):
        played = play_task(expert, env, task_id, 48)
        assert not [o for o in played.observations if o.startswith("Could not")], task_id
        assert played.result.reward == 1.0, task_id


def test_expert_replies_in_each_template_and_noise_only_adds_inventory_checks() -> None:
    from openmanus_rl.agent.templates import get_action_template
    from openmanus_rl.experts import get_expert, reply

    expert = get_expert("textcraft")
    expert.reset(seed=0)
    react = reply(expert, CRAFTING_TABLE_OBS, "react", SPEC)  # the first listed planks recipe: oak
    assert react == "Thought: No crafting command makes oak logs, so I get it.\nAction: get 1 oak logs"
    xml = reply(expert, "Got 1 oak logs", "xml", SPEC)
    assert xml == (
        "<think>I need oak planks on the way to crafting table, and I hold its ingredients, so I craft "
        "it.</think>\n<action>craft 4 oak planks using 1 oak logs</action>"
    )
    assert get_action_template("xml").parse(xml, SPEC).action == "craft 4 oak planks using 1 oak logs"
    assert expert.act("Crafted 4 oak planks") == "craft 1 crafting table using 4 oak planks"
    assert expert.last_thought == "I hold the ingredients for crafting table, the goal, so I craft it."
    assert expert.act("Crafted 1 crafting table") == "inventory"

    noisy = get_expert("textcraft", noise=1.0, seed=0, max_steps=5)
    noisy.reset(seed=1)
    actions = [noisy.act(CRAFTING_TABLE_OBS)] + [noisy.act("ok") for _ in range(4)]
    # the plan takes 3 actions, so 5 allow exactly 2 checks, taken first
    assert actions == [
        "inventory",
        "inventory",
        "get 1 oak logs",
        "craft 4 oak planks using 1 oak logs",
        "craft 1 crafting table using 4 oak planks",
    ]
    blind = get_expert("textcraft")
    assert blind.act("Got 1 oak logs") == "inventory"
    assert blind.last_thought == "I cannot plan from what I see, so I check what I hold."
    assert_noise_refused("textcraft", 2)


# ---------------------------------------------------------------------- over HTTP


server = server_of("textcraft")


@pytest.mark.slow
def test_literal_protocol_exchange() -> None:
    with own_server("textcraft") as u:
        created = call(u, "POST", "/create", {"commands": None, "goal": None})
        assert created == episode_answer(TASK0_OBS)
        assert call(u, "POST", "/reset", {"id": 0, "data_idx": CRAFTING_TABLE}) == episode_answer(CRAFTING_TABLE_OBS)
        assert call(u, "GET", "/observation", params={"id": 0}) == CRAFTING_TABLE_OBS
        for action, observation, reward, done in [
            ("get 1 acacia logs", "Got 1 acacia logs", 0.0, False),
            ("craft 4 acacia planks using 1 acacia logs", "Crafted 4 acacia planks", 0.0, False),
            (
                "craft 1 crafting table using 4 planks",
                "Could not craft crafting table: planks is a kind of item; name a specific one, such as acacia planks.",
                0.0,
                False,
            ),
            ("craft 1 crafting table using 4 acacia planks", "Crafted 1 crafting table", 1.0, True),
        ]:
            answer = call(u, "POST", "/step", {"id": 0, "action": action})
            assert answer == step_answer(observation, reward, done)
        assert call(u, "GET", "/observation", params={"id": 0}) == "Crafted 1 crafting table"
        assert call(u, "POST", "/step", {"id": 0, "action": "inventory"}, status=409) == {
            "error": "episode is done (crafted crafting table): POST /reset to start a new one"
        }
        assert_closes_the_only_env(u)
        assert call(u, "POST", "/create") == episode_answer(
            "Crafting commands:\ncraft 3 acacia wood using 4 acacia log\n\nGoal: craft acacia wood.", env_id=1
        )


@pytest.mark.slow
def test_create_with_a_goal_and_commands(server: str) -> None:
    answer = call(
        server,
        "POST",
        "/create",
        {"commands": "craft 4 stick using 2 planks", "goal": "minecraft:stick", "minecraft_dir": "agentenv_textcraft/"},
    )
    env_id = answer["id"]
    assert answer == episode_answer("Crafting commands:\ncraft 4 stick using 2 planks\n\nGoal: craft stick.", env_id)
    generated = call(server, "POST", "/create", {"goal": "crafting table"})
    assert generated["observation"] == CRAFTING_TABLE_OBS
    for i in (env_id, generated["id"]):
        assert call(server, "POST", "/close", {"id": i}) is True


@pytest.mark.slow
def test_create_refuses_a_bad_goal_and_commands_without_a_goal(server: str) -> None:
    for body, message in [
        ({"goal": "oak logs"}, "invalid request: goal 'oak logs' is not an item that a recipe makes"),
        ({"commands": "craft 4 stick using 2 planks"}, "invalid request: commands needs a goal"),
        ({"goal": 7}, "invalid request: goal: Input should be a valid string"),
    ]:
        assert call(server, "POST", "/create", body, status=422) == {"error": message}, body


@pytest.mark.slow
def test_expert_over_http_solves_test_tasks(server: str) -> None:
    from openmanus_rl.experts import evaluate_expert

    ids = task_ids("test")[::4]  # 25 tasks of depths 1 to 3
    score = evaluate_expert("textcraft", "test", len(ids), server, task_ids=ids, max_turns=48)
    assert (score.n, score.successes, score.rewards) == (25, [True] * 25, [1.0] * 25)
    # one turn per planned action: no failed action, no extra turn
    assert score.steps == [2, 3, 2, 2, 2, 2, 6, 8, 5, 6, 6, 4, 6, 6, 5, 9, 3, 5, 6, 6, 4, 4, 6, 8, 11]
