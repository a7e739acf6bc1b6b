"""Wordle: word lists, secrets and splits, the colour rule and the game's messages, the oracle and the solver-expert
in process, and the family-B protocol under /wordle of a real LMRL-Gym server started by the `lmrlgym` command's
function (literal exchange, Wordle's own bad input, the expert over HTTP)."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from episode_play import assert_step, play, play_task, started
from game_checks import assert_needs_an_episode, assert_noise_refused, assert_refuses_out_of_range, assert_split_ids
from json_call import call, episode_answer, own_server, server_of, step_answer

from agentgym.open_envs import EpisodeStateError
from agentgym.registry import get_env_spec
from agentgym.wordle.data import (
    NUM_TASKS,
    answers,
    feedback,
    guesses,
    secret_of,
    spell,
    task_ids,
    task_list,
    task_order,
)
from agentgym.wordle.env import INSTRUCTION, WordleEnv
from agentgym.wordle.plan import OPENER, consistent, oracle, solver_guess

SPEC = get_env_spec("wordle")
LMRLGYM = [
    sys.executable,
    "-c",
    "import sys; from agentgym.launcher import lmrlgym_main; lmrlgym_main(sys.argv[1:])",
    "--log-level",
    "warning",
]


def view(message: str, *lines: str) -> str:
    return "\n".join([message, INSTRUCTION, *lines])


START_OBS = view("Let's start Wordle!", "No guesses yet.", "Guesses left: 6.")
RAISE_ON_0 = view("b y b g b", "Guess 1: r a i s e -> b y b g b", "Guesses left: 5.")  # task 0's secret is angst
WON_0 = view(
    "g g g g g",
    "Guess 1: r a i s e -> b y b g b",
    "Guess 2: a n g s t -> g g g g g",
    "You found the word in 2 guesses. The episode is over.",
)


# ---------------------------------------------------------------------- words, secrets and splits
def test_word_lists_are_shipped_and_consistent() -> None:
    assert (len(answers()), len(guesses()), NUM_TASKS) == (2135, 6748, 2135)
    assert answers()[:3] == ("abaci", "aback", "abate") and answers()[-1] == "zombi"
    assert set(answers()) <= guesses() and {"shire", "raise", "aalii"} <= guesses() and "xyzzy" not in guesses()
    assert all(len(w) == 5 and w.isalpha() and w.islower() for w in guesses())
    assert sorted(task_order()) == list(answers())


def test_splits_are_disjoint_complete_and_stable() -> None:
    assert_split_ids(task_ids, range(200), range(200, 300), range(300, 2135))
    assert [secret_of(i) for i in range(5)] == ["angst", "dregs", "fussy", "muter", "girth"]
    assert (secret_of(199), secret_of(200), secret_of(2134)) == ("snarl", "scald", "black")
    assert task_list("test")[:2] == [
        (0, "find the secret five-letter word in at most 6 guesses"),
        (1, "find the secret five-letter word in at most 6 guesses"),
    ]
    assert task_list("train")[-1] == (2134, "find the secret five-letter word in at most 6 guesses")
    for task_id in (-1, 2135):
        with pytest.raises(ValueError, match=rf"seed {task_id} out of range: expected 0 <= seed < 2135"):
            secret_of(task_id)


def test_colours_handle_repeated_letters_the_standard_way() -> None:
    assert feedback("shire", "shore") == "g g b g g"
    assert feedback("angst", "angst") == "g g g g g"
    assert feedback("lolly", "hello") == "b y g g b"  # three l guessed, two in the word (both green): one b
    assert feedback("speed", "abide") == "b b y b y"  # two e guessed, one in the word: the first is y, the second b
    assert feedback("eerie", "there") == "y b y b g"  # the green e is counted first
    assert feedback("geese", "eerie") == "b g y b g"
    assert feedback("abbey", "babes") == "y y g g b"
    assert spell("shire") == "s h i r e"


# ---------------------------------------------------------------------- the game
def test_oracle_wins_every_test_task_on_the_first_guess() -> None:
    assert oracle(0) == ["a n g s t"] and oracle(3) == ["m u t e r"]
    env = WordleEnv()
    for task_id in task_ids("test"):
        assert env.reset(task_id) == START_OBS
        result = env.step(oracle(task_id)[0])
        assert (result.reward, result.done) == (1.0, True), task_id
        won = " -> g g g g g\nYou found the word in 1 guess. The episode is over."
        assert result.observation.endswith(won), task_id


def test_a_play_with_every_kind_of_message() -> None:
    env = WordleEnv()
    assert env.reset(0) == START_OBS
    assert_step(env, "r a i s e", RAISE_ON_0)
    assert_step(
        env,
        "x y z z y",
        view(
            'invalid word: "x y z z y" is not in the word list. Nothing changed; no guess was used.',
            "Guess 1: r a i s e -> b y b g b",
            "Guesses left: 5.",
        ),
    )
    unspaced = env.step("angst")
    assert unspaced.observation.split("\n")[0] == (
        'invalid word: "angst" is not five letters separated by spaces (e.g. s h i r e). Nothing changed; no guess '
        "was used."
    )
    assert_step(env, " A N G S T. ", WON_0, 1.0, True)
    assert env.observation == WON_0 and env.history == [("raise", "b y b g b"), ("angst", "g g g g g")]
    with pytest.raises(EpisodeStateError, match="episode is done: POST /wordle/reset to start a new one"):
        env.step("a n g s t")
    assert env.reset(0) == START_OBS and env.history == [] and not env.done


def test_the_sixth_wrong_guess_ends_the_episode_without_reward() -> None:
    env = WordleEnv()
    env.reset(1)  # dregs
    words = ["r a i s e", "s l a t e", "c r a n e", "m o u n t", "a b a c k", "z e b r a"]
    results = [env.step(word) for word in words]
    assert [(r.reward, r.done) for r in results] == [(0.0, False)] * 5 + [(0.0, True)]
    assert results[4].observation.endswith("Guess 5: a b a c k -> b b b b b\nGuesses left: 1.")
    assert results[-1].observation == view(
        "b y b y b",
        "Guess 1: r a i s e -> y b b y y",
        "Guess 2: s l a t e -> y b b b y",
        "Guess 3: c r a n e -> b g b b y",
        "Guess 4: m o u n t -> b b b b b",
        "Guess 5: a b a c k -> b b b b b",
        "Guess 6: z e b r a -> b y b y b",
        "You are out of guesses; the word was d r e g s. The episode is over.",
    )


SHAPE, UNKNOWN = "not five letters separated by spaces", "not in the word list"
INVALID = [
    ("raise", SHAPE),
    ("r a i s", SHAPE),
    ("r a i s e s", SHAPE),
    ("", SHAPE),
    ("1 2 3 4 5", SHAPE),
    ("guess r a i s e", SHAPE),
    ("x y z z y", UNKNOWN),
    ("Q Q Q Q Q", UNKNOWN),
]


@pytest.mark.parametrize(("action", "why"), INVALID)
def test_an_invalid_guess_changes_nothing_and_says_so(action: str, why: str) -> None:
    env = started(WordleEnv(), 0, "r a i s e")
    shown = action.lower() if why == UNKNOWN else action
    suffix = " (e.g. s h i r e)" if why == SHAPE else ""
    assert_step(
        env,
        action,
        view(
            f'invalid word: "{shown}" is {why}{suffix}. Nothing changed; no guess was used.',
            "Guess 1: r a i s e -> b y b g b",
            "Guesses left: 5.",
        ),
    )
    assert env.history == [("raise", "b y b g b")]


def test_reset_refuses_unknown_seeds_and_step_and_observation_need_an_episode() -> None:
    env = WordleEnv()
    assert_needs_an_episode(env, "r a i s e", r"no episode yet: POST /wordle/reset first", observation=True)
    assert_refuses_out_of_range(env.reset, "seed", 2135)


# ---------------------------------------------------------------------- the solver and the expert, in process
def test_solver_filters_the_answers_by_every_colour_seen() -> None:
    history = [("raise", "b y b g b")]
    fits = consistent(history)
    assert len(fits) == 19 and "angst" in fits and all(feedback("raise", w) == "b y b g b" for w in fits)
    assert solver_guess([]) == (OPENER, 2135) == ("raise", 2135)
    assert solver_guess(history) == ("slash", 19)
    assert solver_guess(history + [("slash", "b b y g b")]) == ("angst", 1)
    assert solver_guess([("raise", "g g g g b")]) == ("raise", 0)  # no answer fits: it falls back to the opener


def test_expert_wins_every_test_task_from_the_colours_alone() -> None:
    from agentgym.wordle.expert import WordleExpert, read_history
    from openmanus_rl.experts import get_expert

    assert read_history(RAISE_ON_0) == {1: ("raise", "b y b g b")}
    assert read_history(WON_0) == {1: ("raise", "b y b g b"), 2: ("angst", "g g g g g")}
    expert, env, used = get_expert("wordle"), WordleEnv(), []
    assert isinstance(expert, WordleExpert)
    for task_id in task_ids("test"):
        played = play_task(expert, env, task_id, 6)
        assert played.result.reward == 1.0, task_id
        used.append(len(played.actions))
        if task_id == 0:
            assert played.actions == ["r a i s e", "s l a s h", "a n g s t"]
    assert (len(used), sum(used) / len(used), Counter(used)) == (200, 3.545, {2: 8, 3: 95, 4: 78, 5: 18, 6: 1})


def test_expert_replies_in_each_template_and_noise_guesses_other_fitting_words() -> None:
    from openmanus_rl.agent.templates import get_action_template
    from openmanus_rl.experts import get_expert, reply

    expert = get_expert("wordle")
    assert reply(expert, START_OBS, "react", SPEC) == (
        "Thought: No guesses yet, so I open with raise, which splits the answers best.\nAction: r a i s e"
    )
    xml = reply(expert, RAISE_ON_0, "xml", SPEC)
    assert xml == (
        "<think>19 words fit the colours so far; slash splits them best, so I guess it.</think>\n"
        "<action>s l a s h</action>"
    )
    assert get_action_template("xml").parse(xml, SPEC).action == "s l a s h"
    # what an earlier observation showed is kept: a cut observation loses nothing
    assert expert.act("b b y g b") == "s l a s h"
    assert expert.act(view("b b y g b", "Guess 2: s l a s h -> b b y g b", "Guesses left: 4.")) == "a n g s t"
    assert expert.last_thought == "Only this word fits the colours so far, so I guess angst."

    noisy, env = get_expert("wordle", noise=1.0, seed=3), WordleEnv()
    played = play(env, noisy.act, env.reset(0), 6)
    actions = played.actions
    assert (
        actions[0] == "r a i s e"
        and actions[1] != "s l a s h"
        and actions[1].replace(" ", "") in consistent([("raise", "b y b g b")])
    )
    assert played.result.reward == 1.0
    assert_noise_refused("wordle", 1.5)


# ---------------------------------------------------------------------- over HTTP


server = server_of("wordle")


def test_literal_protocol_exchange_with_the_lmrlgym_command() -> None:
    with own_server("lmrlgym", command=LMRLGYM) as u:
        assert call(u, "POST", "/wordle/create") == {"id": 0}
        assert call(u, "POST", "/wordle/reset", {"id": 0, "seed": 0}) == episode_answer(START_OBS)
        assert call(u, "POST", "/wordle/step", {"id": 0, "action": "r a i s e"}) == step_answer(RAISE_ON_0)
        invalid = view(
            'invalid word: "x y z z y" is not in the word list. Nothing changed; no guess was used.',
            "Guess 1: r a i s e -> b y b g b",
            "Guesses left: 5.",
        )
        assert call(u, "POST", "/wordle/step", {"id": 0, "action": "x y z z y"}) == step_answer(invalid)
        assert call(u, "GET", "/wordle/observation", params={"id": 0}) == invalid
        assert call(u, "POST", "/wordle/step", {"id": 0, "action": "a n g s t"}) == step_answer(WON_0, 1.0, True)
        assert call(u, "POST", "/wordle/step", {"id": 0, "action": "a n g s t"}, status=409) == {
            "error": "episode is done: POST /wordle/reset to start a new one"
        }
        assert call(u, "POST", "/maze/create") == {"id": 0}  # the same server walks the maze too
        assert call(u, "POST", "/maze/reset", {"id": 0, "game": 25})["observation"] == (
            "The goal is at position 8, 6. Your current position is at position 7, 6. There are walls to your left, "
            "to your right. Moves left: 50."
        )
        assert call(u, "GET", "/wordle/list_envs") == [0] and call(u, "GET", "/maze/list_envs") == [0]
        assert call(u, "POST", "/wordle/close", {"id": 0}) is True
        assert call(u, "GET", "/wordle/list_envs") == [] and call(u, "GET", "/maze/list_envs") == [0]
        assert call(u, "POST", "/wordle/create", {"ignored": True}) == {"id": 1}


def test_a_new_env_needs_a_reset_with_a_seed_and_routes_live_under_wordle(server: str) -> None:
    env_id = call(server, "POST", "/wordle/create")["id"]
    no_episode = {"error": "no episode yet: POST /wordle/reset first"}
    assert call(server, "GET", "/wordle/observation", params={"id": env_id}, status=409) == no_episode
    assert call(server, "POST", "/wordle/step", {"id": env_id, "action": "r a i s e"}, status=409) == no_episode
    assert call(server, "POST", "/wordle/reset", {"id": env_id}, status=422) == {
        "error": "invalid request: seed: Field required"
    }
    assert call(server, "POST", "/step", {"id": env_id, "action": "r a i s e"}, status=404) == {"error": "Not Found"}
    assert call(server, "POST", "/wordle/close", {"id": env_id}) is True


def test_expert_over_http_wins_test_tasks(server: str) -> None:
    from openmanus_rl.experts import evaluate_expert

    ids = task_ids("test")[::20]  # 10 tasks
    score = evaluate_expert("wordle", "test", len(ids), server, task_ids=ids, max_turns=6)
    assert (score.n, score.successes, score.rewards) == (10, [True] * 10, [1.0] * 10)
    assert score.steps == [3, 4, 4, 3, 3, 3, 2, 3, 2, 5]  # as in process: one turn per guess, no invalid word
