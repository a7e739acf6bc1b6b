"""The agent against the toy family-B server with a scripted generator:
exact token layout, masks, rewards, groups, seeds.

The toy env's task k asks to reach k by ``add N`` actions (see toy_server.py).
Token ids used below (SmolLM2 tokenizer):
  "Action: add 1" -> [16521, 42, 803, 216, 33]      <|im_end|> -> 2
  "value 1" -> [3221, 216, 33]    "value 2" -> [3221, 216, 34]
  observation head "\\n<|im_start|>user\\n" -> [198, 1, 4093, 198]
  observation tail "<|im_end|>\\n<|im_start|>assistant\\n" -> [2, 198, 1, 520, 9531, 198]
"""

import re

import pytest
import requests
import torch
from agent_helpers import ScriptedGenerator, task_batch, text_policy, toy_counter_config

from openmanus_rl.agent import OpenManusAgent, trajectory_seed, turn_seed
from verl.trainer.ppo.reward import RewardManager

pytestmark = pytest.mark.slow

PROMPT_TEXT = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nReach the target number by adding.\n\n"
    "Answer every turn in exactly this format:\n"
    "Thought: <your reasoning about what to do next>\nAction: <exactly one action>\n\n"
    "Observation:\nTask 3: value 0.<|im_end|>\n<|im_start|>assistant\n"
)
ADD1 = [16521, 42, 803, 216, 33]
HEAD, TAIL = [198, 1, 4093, 198], [2, 198, 1, 520, 9531, 198]
R1 = ADD1 + [2]  # stopped on <|im_end|>: sampled, mask 1
O1 = HEAD + [3221, 216, 33] + TAIL  # "value 1" turn: mask 0
R2 = ADD1  # stopped by length: no <|im_end|> sampled ...
E = [2]  # ... so one is appended with mask 0
O2 = HEAD + [3221, 216, 34] + TAIL  # "value 2" turn
R3 = ADD1 + [2]  # reaches 3: done, reward 1
RESPONSE = R1 + O1 + R2 + E + O2 + R3
MASK = [1] * 6 + [0] * 13 + [1] * 5 + [0] + [0] * 13 + [1] * 6
MODEL_POSITIONS = [i for i, m in enumerate(MASK) if m]  # 0-5, 19-23, 38-43: 17 tokens


def scripted_three_turns() -> ScriptedGenerator:
    """Call 0 and 2 answer "Action: add 1<|im_end|>"; call 1 answers "Action: add 1" cut by length."""
    replies = [(R1, "stop"), (R2, "length"), (R3, "stop")]
    generator = ScriptedGenerator(lambda prompt, seed: replies[len(generator.calls) - 1])
    return generator


def config(server, **overrides):
    return toy_counter_config(server.port, **overrides)


def test_exact_layout_of_a_scripted_three_turn_episode(tokenizer, toy_server):
    generator = scripted_three_turns()
    with OpenManusAgent(tokenizer, generator, config(toy_server)) as agent:
        out = agent.run_llm_loop(task_batch([3], data_source="toy"))
    prompt = tokenizer.encode(PROMPT_TEXT, add_special_tokens=False)
    P, T = len(prompt), len(RESPONSE)
    assert T == 44
    b = out.batch
    assert b["prompts"].tolist() == [prompt]
    assert b["responses"].tolist() == [RESPONSE]
    assert b["input_ids"].tolist() == [prompt + RESPONSE]
    assert b["response_mask"].tolist() == [MASK]
    assert b["attention_mask"].tolist() == [[1] * (P + T)]  # observation tokens are attended, nothing is padding
    assert b["position_ids"].tolist() == [list(range(P + T))]
    assert b["rollout_log_probs"].tolist() == [[-0.25 if m else 0.0 for m in MASK]]
    assert "token_level_scores" not in b  # scores come from the reward path (tests/verl/test_reward_path.py)
    # the model was prompted with exactly the tokens it is trained on
    assert [c["prompts"] for c in generator.calls] == [[prompt], [prompt + R1 + O1], [prompt + R1 + O1 + R2 + E + O2]]
    assert generator.calls[0]["meta_info"] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_tokens": 16,
        "stop_token_ids": [2],
        "do_sample": True,
    }
    nt = out.non_tensor_batch
    assert (
        nt["task_id"][0],
        nt["num_turns"][0],
        nt["success"][0],
        nt["env_reward"][0],
        nt["failed"][0],
        nt["status"][0],
        nt["data_source"][0],
    ) == (3, 3, True, 1.0, False, "done", "toy")
    assert nt["reward_breakdown"][0] == {"goal": 1.0}
    turns = nt["trajectory"][0]
    assert [t["role"] for t in turns] == ["observation", "assistant"] * 3 + ["observation"]
    assert [t["text"] for t in turns[1::2]] == ["Action: add 1"] * 3
    assert [t["finish_reason"] for t in turns[1::2]] == ["stop", "length", "stop"]
    assert [t["end_of_turn_appended"] for t in turns[1::2]] == [False, True, False]
    assert [t["text"] for t in turns[::2]] == ["Task 3: value 0.", "value 1", "value 2", "value 3"]
    assert turns[-1]["in_sequence"] is False  # the final observation is not part of the training sequence
    m = out.meta_info["metrics"]
    assert (
        m["env/success_rate"],
        m["env/turns/mean"],
        m["env/invalid_action_rate"],
        m["rollout/generated_tokens"],
        m["env/failed_trajectories"],
        m["env/errors"],
    ) == (1.0, 3.0, 0.0, 17.0, 0.0, 0.0)


def test_single_rollout_path_gives_the_same_layout(tokenizer, toy_server):
    generator = scripted_three_turns()
    with OpenManusAgent(tokenizer, generator, config(toy_server)) as agent:
        out = agent._run_single_rollout(3, seed=11)
    assert out.batch["responses"].tolist() == [RESPONSE]
    assert out.batch["response_mask"].tolist() == [MASK]
    assert [c["seeds"] for c in generator.calls] == [[11], [11 + 1_000_003], [11 + 2 * 1_000_003]]


@pytest.mark.parametrize(
    "allocation, expected",
    [
        # R = goal 1.0 + format 0.5 * (3 of 3 turns match) = 1.5
        ("last_token", {43: 1.5}),
        ("uniform_positive", {i: 1.5 / 17 for i in MODEL_POSITIONS}),
        ("discounted", {5: 0.25 * 1.5, 23: 0.5 * 1.5, 43: 1.5}),  # gamma 0.5 over the turn ends 5, 23, 43
    ],
)
def test_reward_allocation_through_the_agent(tokenizer, toy_server, allocation, expected):
    cfg = config(
        toy_server, reward_components={"goal": 1.0, "format": {"weight": 0.5, "patterns": [r"^Action: add \d+$"]}}
    )
    with OpenManusAgent(tokenizer, scripted_three_turns(), cfg) as agent:
        out = agent.run_llm_loop(task_batch([3]))
    assert "token_level_scores" not in out.batch  # the agent reports what happened; the reward path scores it
    assert out.non_tensor_batch["reward_total"][0] == 1.5 and list(out.non_tensor_batch["turn_ends"][0]) == [5, 23, 43]
    RewardManager(tokenizer, "episode", allocation, gamma=0.5)(out)
    want = torch.zeros(1, 44)
    for position, value in expected.items():
        want[0, position] = value
    assert torch.allclose(out.batch["token_level_scores"], want)
    assert out.batch["outcome_scores"].tolist() == [1.5]  # the trajectory's score whatever the allocation
    assert out.non_tensor_batch["reward_breakdown"][0] == {"goal": 1.0, "format": 0.5}
    assert out.meta_info["metrics"]["reward/format/mean"] == 0.5
    assert out.meta_info["metrics"]["reward/total/mean"] == 1.5


def solve(tokenizer):
    """Reads "Task k" off the prompt and answers "Action: add k" (solves any task in one turn)."""
    return text_policy(tokenizer, lambda prompt: "Action: add " + re.findall(r"Task (\d+): value 0\.", prompt)[-1])


def test_groups_task_ids_and_seeds(tokenizer, toy_server):
    before = len(requests.get(toy_server.url + "/debug/resets", timeout=5).json())
    generator = ScriptedGenerator(solve(tokenizer))
    with OpenManusAgent(tokenizer, generator, config(toy_server, n=3, seed=7)) as agent:
        out = agent.run_llm_loop(task_batch([3, 12], uid=["g-a", "g-b"]), global_step=4)
        repeat = agent.run_llm_loop(task_batch([3, 12], uid=["g-a", "g-b"]), global_step=4)
        later = agent.run_llm_loop(task_batch([3, 12], uid=["g-a", "g-b"]), global_step=5)
    nt = out.non_tensor_batch
    assert list(nt["uid"]) == ["g-a"] * 3 + ["g-b"] * 3  # rows of a group adjacent, the dataset's uid kept
    assert list(nt["task_id"]) == [3, 3, 3, 12, 12, 12]
    assert list(nt["success"]) == [True] * 6
    resets = requests.get(toy_server.url + "/debug/resets", timeout=5).json()[before:]
    assert sorted(task for _, task in resets) == [3] * 9 + [12] * 9  # three runs, each task reset n=3 times
    expected = [trajectory_seed(7, 4, f"webshop:{task}", copy) for task in (3, 12) for copy in range(3)]
    assert list(nt["seed"]) == expected and len(set(expected)) == 6
    assert generator.calls[0]["seeds"] == [turn_seed(s, 0) for s in expected] == expected
    assert list(repeat.non_tensor_batch["seed"]) == expected  # deterministic per (seed, step, task, copy)
    assert not set(later.non_tensor_batch["seed"]) & set(expected)
    # prompts differ only by their observation; left padding keeps the right edge aligned
    prompts, mask = out.batch["prompts"], out.batch["attention_mask"][:, : out.batch["prompts"].shape[1]]
    assert (mask.sum(1) == torch.tensor([len(c) for c in generator.calls[0]["prompts"]])).all()
    assert (prompts[:, -6:] == torch.tensor([35, 30, 2, 198, 1, 520, 9531, 198][2:])).all()


def test_invalid_actions_are_counted_and_explained(tokenizer, toy_server):
    chat_feedback = (
        "Invalid action: your reply has no 'Action:' line, so nothing happened. "
        "Reply with 'Thought: ...' and then 'Action: <exactly one action>'."
    )
    replies = iter([(tokenizer.encode("I give up") + [2], "stop"), (ADD1[:-1] + [35, 2], "stop")])  # "Action: add 3"
    generator = ScriptedGenerator(lambda prompt, seed: next(replies))
    with OpenManusAgent(tokenizer, generator, config(toy_server)) as agent:
        out = agent.run_llm_loop(task_batch([3]))
    feedback = tokenizer.encode(chat_feedback)
    invalid = [57, 1928, 614, 2]  # "I give up" <|im_end|>
    assert out.batch["responses"][0].tolist() == invalid + HEAD + feedback + TAIL + ADD1[:-1] + [35, 2]
    assert out.batch["response_mask"][0].tolist() == [1] * 4 + [0] * (len(feedback) + 10) + [1] * 6
    turns = out.non_tensor_batch["trajectory"][0]
    assert (turns[1]["action"], turns[1]["valid"], turns[2]["text"], turns[2]["feedback"]) == (
        None,
        False,
        chat_feedback,
        True,
    )
    m = out.meta_info["metrics"]
    assert (m["env/invalid_actions"], m["env/invalid_action_rate"], m["env/success_rate"]) == (1.0, 0.5, 1.0)


def test_only_invalid_replies_reach_the_turn_limit(tokenizer, toy_server):
    generator = ScriptedGenerator(lambda prompt, seed: ([57, 1928, 614, 2], "stop"))
    with OpenManusAgent(tokenizer, generator, config(toy_server, max_turns=2)) as agent:
        out = agent.run_llm_loop(task_batch([3]))
    nt, m = out.non_tensor_batch, out.meta_info["metrics"]
    assert (nt["status"][0], nt["num_turns"][0], nt["success"][0], nt["failed"][0]) == ("turn_limit", 2, False, False)
    assert (m["env/invalid_action_rate"], m["env/turn_limit_trajectories"], m["reward/goal/mean"]) == (1.0, 1.0, 0.0)


def test_token_budget_stops_the_episode(tokenizer, toy_server):
    # Budget after the prompt: 286 - 256 = 30 tokens; a model turn may take 8 + 1 (appended end-of-turn).
    # Turn 1: 0 + 9 <= 30.  Turn 2: 6 (R1) + 13 (O1) + 9 = 28 <= 30.  Turn 3: 25 + 13 (O2) + 9 = 47 > 30: stop.
    generator = scripted_three_turns()
    cfg = config(toy_server, max_response_length=8, max_trajectory_length=286)
    with OpenManusAgent(tokenizer, generator, cfg) as agent:
        out = agent.run_llm_loop(task_batch([3]))
    assert out.batch["responses"].tolist() == [R1 + O1 + R2 + E]
    assert out.batch["responses"].shape[1] <= 286 - out.batch["prompts"].shape[1]
    assert (out.non_tensor_batch["status"][0], out.non_tensor_batch["success"][0]) == ("truncated", False)
    assert out.non_tensor_batch["reward_total"][0] == 0.0  # not done: the env paid nothing
    assert out.meta_info["metrics"]["rollout/truncated_trajectories"] == 1.0
    assert len(generator.calls) == 2


def test_long_observations_are_cut(tokenizer, toy_server):
    generator = scripted_three_turns()
    with OpenManusAgent(tokenizer, generator, config(toy_server, max_obs_length=5)) as agent:
        out = agent.run_llm_loop(task_batch([3]))
    prompt_text = tokenizer.decode(out.batch["prompts"][0].tolist())
    assert prompt_text.endswith("Observation:\nTask [truncated]<|im_end|>\n<|im_start|>assistant\n")
    assert out.batch["responses"].tolist() == [RESPONSE]  # "value N" (3 tokens) fits in 5
    assert out.non_tensor_batch["trajectory"][0][0]["truncated"] is True
    assert out.meta_info["metrics"]["env/truncated_observations"] == 1.0


def test_greedy_validation_passes_do_sample_false(tokenizer, toy_server):
    generator = ScriptedGenerator(solve(tokenizer))
    with OpenManusAgent(tokenizer, generator, config(toy_server)) as agent:
        agent.run_llm_loop(task_batch([2]), do_sample=False)
    assert generator.calls[0]["meta_info"]["do_sample"] is False


def test_prompt_budget_too_small_for_the_instructions(tokenizer, toy_server):
    with pytest.raises(
        ValueError, match=r"max_prompt_length 64 is too small: the toy-counter instructions alone take \d+ tokens"
    ):
        OpenManusAgent(tokenizer, ScriptedGenerator(solve(tokenizer)), config(toy_server, max_prompt_length=64))


def test_padding_after_the_end_of_turn_never_enters_the_sequence(tokenizer, toy_server):
    """An engine that pads its answers (pad id 2 = <|im_end|> for SmolLM2) still yields R1 + O1 + ... only."""
    padded = iter([(R1 + [2, 2, 2], "stop"), (ADD1 + [2, 2], "stop"), (R3 + [2], "stop")])
    generator = ScriptedGenerator(lambda prompt, seed: next(padded))
    with OpenManusAgent(tokenizer, generator, config(toy_server)) as agent:
        out = agent.run_llm_loop(task_batch([3]))
    # turn 2 now ended with a sampled <|im_end|> (mask 1) instead of an appended one
    assert out.batch["responses"].tolist() == [R1 + O1 + ADD1 + [2] + O2 + R3]
    assert out.batch["response_mask"].tolist() == [[1] * 6 + [0] * 13 + [1] * 6 + [0] * 13 + [1] * 6]
    assert out.batch["rollout_log_probs"][0].tolist() == [-0.25 if m else 0.0 for m in out.batch["response_mask"][0]]


@pytest.mark.parametrize("allocation, last_scores", [("last_token", [1.0, 1.0, 1.0]), ("discounted", [0.25, 0.5, 1.0])])
def test_stepwise_rows_with_a_one_turn_history_window(tokenizer, toy_server, allocation, last_scores):
    generator = scripted_three_turns()
    cfg = config(toy_server, history_window=1)
    with OpenManusAgent(tokenizer, generator, cfg) as agent:
        out = agent.run_llm_loop(task_batch([3], uid=["g"]))
    RewardManager(tokenizer, "episode", allocation, gamma=0.5)(out)
    prompt = tokenizer.encode(PROMPT_TEXT, add_special_tokens=False)
    # turn 0 sees the prompt; turn 1 the prompt and turn 0; turn 2 the prompt and turn 1 only (turn 0 left the window)
    contexts = [prompt, prompt + R1 + O1, prompt + R2 + E + O2]
    assert [c["prompts"][0] for c in generator.calls] == contexts
    P = len(prompt) + 19  # widest context: 6 (R1) + 13 (O1) = 5 + 1 + 13 (R2, E, O2) = 19 tokens of history
    b = out.batch
    assert b["prompts"].tolist() == [[2] * (P - len(c)) + c for c in contexts]  # left-padded with pad id 2
    assert b["responses"].tolist() == [R1, R2 + E, R3]  # 6 tokens each: T = 6, no padding
    assert b["response_mask"].tolist() == [[1] * 6, [1] * 5 + [0], [1] * 6]
    assert b["attention_mask"][:, P:].tolist() == [[1] * 6, [1] * 6, [1] * 6]
    # R = 1.0 on each turn's last model token (index 5, 4, 5); discounted: 0.5^2, 0.5^1, 0.5^0
    expected = torch.zeros(3, 6)
    for row, (position, value) in enumerate(zip([5, 4, 5], last_scores)):
        expected[row, position] = value
    assert torch.allclose(b["token_level_scores"], expected)
    assert b["outcome_scores"].tolist() == [1.0, 1.0, 1.0]  # every row of the trajectory carries its R
    nt = out.non_tensor_batch
    assert list(nt["step"]) == [0, 1, 2] and list(nt["traj_uid"]) == ["g/0"] * 3 and list(nt["uid"]) == ["g"] * 3
    assert list(nt["success"]) == [True] * 3 and list(nt["task_id"]) == [3] * 3


def test_seeds_name_the_task_not_its_place_in_the_batch(tokenizer, toy_server):
    """A task's samples get the same seeds in any batch order or batch make-up; a task listed twice in one
    batch samples differently the second time (``task#1``)."""
    generator = ScriptedGenerator(solve(tokenizer))
    with OpenManusAgent(tokenizer, generator, config(toy_server, n=2, seed=7)) as agent:
        forward = agent.run_llm_loop(task_batch([3, 12]), global_step=0).non_tensor_batch
        backward = agent.run_llm_loop(task_batch([12, 3]), global_step=0).non_tensor_batch
        alone = agent.run_llm_loop(task_batch([12]), global_step=0).non_tensor_batch
        twice = agent.run_llm_loop(task_batch([3, 3]), global_step=0).non_tensor_batch
    seeds = {(task, copy): seed for task, seed, copy in zip(forward["task_id"], forward["seed"], [0, 1, 0, 1])}
    assert list(backward["seed"]) == [seeds[12, 0], seeds[12, 1], seeds[3, 0], seeds[3, 1]]
    assert list(alone["seed"]) == [seeds[12, 0], seeds[12, 1]]
    assert list(twice["seed"]) == [
        seeds[3, 0],
        seeds[3, 1],
        trajectory_seed(7, 0, "webshop:3#1", 0),
        trajectory_seed(7, 0, "webshop:3#1", 1),
    ]
    assert seeds[3, 0] == trajectory_seed(7, 0, "webshop:3", 0)


def test_dataset_columns_reach_the_reward_module(tokenizer, toy_server):
    """Every non-tensor dataset column rides along with each of the row's trajectories to the reward call."""
    from verl.utils.reward_score import DATA_SOURCE_TO_FN, SUPPORTED_REWARD_SCORE_FNS, register_reward_score

    seen = []

    def needs_ground_truth(data_source, solution_str, ground_truth, extra_info=None):
        seen.append((ground_truth, extra_info["split"], extra_info["num_turns"]))
        return float(ground_truth["target"] == 3)

    register_reward_score("t_agent_gt", needs_ground_truth)
    try:
        with OpenManusAgent(tokenizer, ScriptedGenerator(solve(tokenizer)), config(toy_server, n=2)) as agent:
            out = agent.run_llm_loop(
                task_batch(
                    [3, 12],
                    reward_model=[{"ground_truth": {"target": 3}}, {"ground_truth": {"target": 12}}],
                    ability=["toy", "toy"],
                )
            )
        nt = out.non_tensor_batch
        assert list(nt["ability"]) == ["toy"] * 4
        assert [r["ground_truth"]["target"] for r in nt["reward_model"]] == [
            3,
            3,
            12,
            12,
        ]  # copies of a row share its columns
        RewardManager(tokenizer, "t_agent_gt")(out)
        assert seen == [({"target": 3}, "test", 1)] * 2 + [({"target": 12}, "test", 1)] * 2
        assert out.batch["outcome_scores"].tolist() == [1.0, 1.0, 0.0, 0.0]
    finally:
        SUPPORTED_REWARD_SCORE_FNS.pop("t_agent_gt")
        DATA_SOURCE_TO_FN.pop("t_agent_gt", None)
