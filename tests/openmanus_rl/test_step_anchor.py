"""The step-wise batch's ``anchor_obs`` column (the env state each turn acted on), for GiGPO's anchor groups."""

import numpy as np
import pytest
from agent_helpers import TOY_COUNTER, ScriptedGenerator, task_batch, toy_counter_config

from openmanus_rl.agent import OpenManusAgent
from openmanus_rl.agent.output import build_batch, normalize_observation
from openmanus_rl.agent.trajectory import Trajectory
from openmanus_rl.envs import EnvSpec, register_env
from verl.trainer.ppo.gigpo import compute_gigpo_advantage
from verl.trainer.ppo.reward import RewardManager

SPEC = TOY_COUNTER
EOT = 2


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Task 3: value 0.", "task 3: value 0."),
        (
            "  You are in the  MIDDLE\tof a room.\n\nLooking around,\r\n you see a desk.  ",
            "you are in the middle of a room. looking around, you see a desk.",
        ),
        ("[SEP]  Search\n[SEP]", "[sep] search [sep]"),  # punctuation and brackets are kept
        ("\n \t ", ""),
        ("", ""),
    ],
)
def test_normalize_observation(text, expected):
    assert normalize_observation(text) == expected


class Feedback(str):
    """The agent's invalid-action feedback, among `episode`'s observations: not an env state."""


def episode(uid, copy, first_token, observations, reward=1.0, status="done"):
    """A trajectory built the way the agent builds one: the reset observation ``observations[0]``, then for each
    later entry a model turn ``[first_token + i, EOT]`` and what came back: an env observation, or a `Feedback`."""
    t = Trajectory(row=0, copy=copy, uid=uid, task_id=3, data_source="toy", seed=copy, prompt_ids=[5, 6])
    # the reset observation, recorded by _build_prompt (no "feedback" key)
    t.turns.append({"role": "observation", "text": observations[0], "in_sequence": True})
    for token, text in enumerate(observations[1:], first_token):
        t.windows.append(t.window_start(1))
        t.add_model_turn([token, EOT], [-0.5] * 2, EOT)
        t.model_texts.append("Action: add 1")
        t.turns.append({"role": "assistant", "text": "Action: add 1", "valid": True})
        t.add_observation_turn([7, 8])
        feedback = isinstance(text, Feedback)
        t.turns.append({"role": "observation", "text": str(text), "feedback": feedback, "in_sequence": True})
    t.step_rewards.append(reward)
    t.status = status
    return t


INVALID = Feedback("Invalid action: x")
OUT_OF_TURNS = {"reward": 0.0, "status": "turn_limit"}  # lost at the turn limit


def three_episodes():
    """Task 3 won (a) and lost (b, whose second turn is invalid), task 4 failed (c)."""
    a = episode("g", 0, 11, ["Task 3:  Value 0.", "VALUE 1", "value 2", "value 3"])
    # turn 1 is invalid: the feedback is not a state, so turn 2 acts on the reset state again
    format_feedback = Feedback("Invalid action: reply with 'Action: ...'.")
    b = episode("g", 1, 21, ["task 3: value 0.\n", format_feedback, "Value 1", "value 2"], **OUT_OF_TURNS)
    c = episode("h", 0, 31, ["Task 4: value 0.", INVALID, INVALID], **OUT_OF_TURNS)
    c.fail("EnvClientError: boom")  # a failed trajectory still gets its anchors (GiGPO skips it by its mask)
    return [a, b, c], [(1.0, {"goal": 1.0}), (0.0, {"goal": 0.0}), (0.0, {"goal": 0.0})]


# GiGPO's advantages of the three episodes: group g has R = 1 (a), 0 (b)
#   episode: mean 0.5, std sqrt(0.5) -> A_E = +-0.5/sqrt(0.5) = +-1/sqrt2 (epsilon 0)
#   anchor "task 3: value 0.": G = 0.25 (a, k=0, K=3), 0 (b, k=0), 0 (b, k=1) -> mean 1/12,
#     deviations 1/6, -1/12, -1/12, unbiased var (1/36 + 1/144 + 1/144)/2 = 1/48, std 1/sqrt48
#     -> A_S = (1/6)*sqrt48 = 1.1547005383792515, -(1/12)*sqrt48 = -0.5773502691896258 (twice)
#   anchor "value 1": G = 0.5 (a, k=1), 0 (b, k=2) -> +-1/sqrt2;   anchor "value 2": a alone -> 0
#   group h is failed (mask 0) -> 0
R2, S48 = 0.5**0.5, 48**0.5
WON_TURNS = (R2 + S48 / 6, R2 + R2, R2 + 0.0)  # a's turns
LOST_TURNS = (-R2 - S48 / 12, -R2 - S48 / 12, -R2 - R2)  # b's turns


def gigpo_advantages(out):
    """The rows of ``out`` through the episode reward path, then GiGPO (step_gamma 0.5, epsilon 0)."""
    RewardManager(NoText(), "episode")(out)  # the reward path: every row of a trajectory carries its R
    adv, _ = compute_gigpo_advantage(
        out.batch["token_level_scores"],
        out.batch["response_mask"].float(),
        np.array(out.non_tensor_batch["uid"], dtype=object),
        out.non_tensor_batch,
        scores=out.batch["outcome_scores"],
        step_gamma=0.5,
        epsilon=0.0,
    )
    return adv


def test_anchor_per_row_skips_invalid_action_feedback():
    trajectories, scores = three_episodes()
    out = build_batch(trajectories, scores, {"toy": SPEC}, pad_id=0, dataset_columns={}, step_wise=True)
    nt = out.non_tensor_batch
    assert list(nt["anchor_obs"]) == [
        "task 3: value 0.",
        "value 1",
        "value 2",  # a
        "task 3: value 0.",
        "task 3: value 0.",
        "value 1",  # b: turn 1 follows the feedback
        "task 4: value 0.",
        "task 4: value 0.",  # c (failed)
    ]
    assert nt["anchor_obs"].dtype == object
    # the existing columns are unchanged
    assert list(nt["traj_uid"]) == ["g/0"] * 3 + ["g/1"] * 3 + ["h/0"] * 2
    assert list(nt["step"]) == [0, 1, 2, 0, 1, 2, 0, 1]
    assert list(nt["uid"]) == ["g"] * 6 + ["h"] * 2
    assert out.batch["responses"].tolist() == [[11, 2], [12, 2], [13, 2], [21, 2], [22, 2], [23, 2], [31, 2], [32, 2]]
    assert out.batch["response_mask"].tolist() == [[1, 1]] * 6 + [[0, 0]] * 2

    # the columns feed GiGPO as they are
    adv = gigpo_advantages(out)
    assert adv[:, 0].tolist() == pytest.approx([*WON_TURNS, *LOST_TURNS, 0.0, 0.0], abs=1e-6)


def test_whole_trajectory_rows_carry_each_turns_anchor_and_get_the_same_advantages():
    """history_window = 0: one row per trajectory, with one anchor per turn; GiGPO gives each turn's model tokens
    the advantage its step-wise row gets above."""
    trajectories, scores = three_episodes()
    out = build_batch(trajectories, scores, {"toy": SPEC}, pad_id=0, dataset_columns={})
    nt = out.non_tensor_batch
    assert list(nt["turn_ends"]) == [[1, 5, 9], [1, 5, 9], []]  # model turns of 2 tokens, observations of 2
    assert list(nt["anchor_obs"]) == [
        ["task 3: value 0.", "value 1", "value 2"],
        ["task 3: value 0.", "task 3: value 0.", "value 1"],
        [],
    ]
    adv = gigpo_advantages(out)
    a, b = WON_TURNS, LOST_TURNS
    assert adv[0].tolist()[:10] == pytest.approx([a[0], a[0], 0, 0, a[1], a[1], 0, 0, a[2], a[2]], abs=1e-6)
    assert adv[1].tolist()[:10] == pytest.approx([b[0], b[0], 0, 0, b[1], b[1], 0, 0, b[2], b[2]], abs=1e-6)
    assert not adv[2].any()


class NoText:
    """The agentgym reward reads the agent's reported total, not the text."""

    def decode(self, ids, skip_special_tokens=True):
        return ""


def test_inconsistent_turn_record_is_an_error():
    t = episode("g", 0, 11, ["value 0", "value 1"])
    t.turns = [t.turns[0]]  # the assistant entry is missing
    with pytest.raises(RuntimeError, match=r"trajectory g/0 records 0 assistant turns but has 1 model turns"):
        build_batch([t], [(1.0, {"goal": 1.0})], {"toy": SPEC}, pad_id=0, dataset_columns={}, step_wise=True)


@pytest.mark.slow
@pytest.mark.parametrize("history_window", [1, 0])
def test_agent_rows_carry_the_anchor(tokenizer, toy_server, history_window):
    """Through the real agent and toy server: an invalid first reply, then "Action: add 3" solves task 3; step-wise
    rows carry one anchor each, a whole-trajectory row one per turn."""
    replies = iter(
        [
            (tokenizer.encode("I give up") + [EOT], "stop"),
            (tokenizer.encode("Action: add 3", add_special_tokens=False) + [EOT], "stop"),
        ]
    )
    generator = ScriptedGenerator(lambda prompt, seed: next(replies))
    cfg = toy_counter_config(toy_server.port, history_window=history_window)
    with OpenManusAgent(tokenizer, generator, cfg) as agent:
        out = agent.run_llm_loop(task_batch([3], uid=["g"]))
    nt = out.non_tensor_batch
    assert [t["role"] for t in nt["trajectory"][0]] == ["observation", "assistant"] * 2 + ["observation"]
    anchors = ["task 3: value 0.", "task 3: value 0."]  # the feedback turn changed nothing
    if history_window:
        assert list(nt["step"]) == [0, 1]
        assert list(nt["anchor_obs"]) == anchors
    else:
        assert len(nt["turn_ends"][0]) == 2 and list(nt["anchor_obs"]) == [anchors]
        assert list(nt["step_reward"][0]) == [0.0, 1.0]  # the env paid on the second turn only


SCORED = register_env(
    EnvSpec(
        name="toy-scored",
        family="B",
        reset_field="data_idx",
        reward_scale=100.0,
        instructions="Raise the score.",
        action_pattern=r"add \d+",
    ),
    replace=True,
)


def test_step_rows_carry_what_each_turn_earned_on_the_way():
    """``step_reward``: the goal weight times the running env score's increment over the reward scale; a turn
    without an env step (invalid action) earns 0; a failed trajectory earns nothing."""
    from openmanus_rl.rewards import RewardComposer

    composer = RewardComposer.from_config({"goal": 2.0, "length": {"weight": 0.1, "max_length": 1}}, "toy-scored")
    t = episode("g", 0, 11, ["score 0", "score 10", INVALID, "score 35", "score 35"], reward=35.0)
    assistant = [e for e in t.turns if e["role"] == "assistant"]
    for entry, reward in zip(assistant, (10.0, None, 35.0, 35.0)):  # turn 1 was invalid: no env step, no reward
        if reward is not None:
            entry["reward"] = reward
    failed = episode("h", 0, 21, ["score 0", "score 50"], reward=50.0)
    failed.turns[1]["reward"] = 50.0
    failed.fail("EnvClientError: boom")
    t.env = failed.env = "toy-scored"
    scores = [(0.7, {"goal": 0.7}), (0.0, {"goal": 0.0})]
    specs = {"toy-scored": SCORED}
    out = build_batch(
        [t, failed], scores, specs, pad_id=0, dataset_columns={}, composers={"toy-scored": composer}, step_wise=True
    )
    # 2 * (10 - 0) / 100, 2 * (10 - 10) / 100, 2 * (35 - 10) / 100, 2 * (35 - 35) / 100; then the failed one
    assert list(out.non_tensor_batch["step_reward"]) == pytest.approx([0.2, 0.0, 0.5, 0.0, 0.0])
    assert (
        "step_reward"
        not in build_batch([t], scores[:1], specs, pad_id=0, dataset_columns={}, step_wise=True).non_tensor_batch
    )
    whole = build_batch([t, failed], scores, specs, pad_id=0, dataset_columns={}, composers={"toy-scored": composer})
    assert [list(v) for v in whole.non_tensor_batch["step_reward"]] == [pytest.approx([0.2, 0.0, 0.5, 0.0]), []]
