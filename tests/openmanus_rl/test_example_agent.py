"""The example WebShop agent (``examples/webshop_openai_agent.py``): its tool-call reading, then as the gateway's agent
program against a real WebShop server, with scripted "models" that answer with the WebShop expert's actions as tool
calls or never call a tool."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import pytest
import requests
from agent_helpers import PLAIN, Reply, ScriptedGenerator, task_batch, text_policy
from gateway_helpers import EOT, row

from agentgym.webshop.expert import WebShopExpert
from examples.webshop_openai_agent import DEFAULT_ENV_URL, MAX_PAGE_CHARS, MAX_TURNS, NUDGE, action, env_url, page_view
from openmanus_rl.gateway import GatewayConfig, GatewayRollout

PROGRAM = "examples.webshop_openai_agent:play"
LIMITS = {"max_prompt_length": 1024, "max_response_length": 64, "max_trajectory_length": 8192}
GOAL = 0  # a test goal the expert solves (reward 1.0)
ACTION = re.compile(r"(search|click)\[(.+)\]")


def rollout(tokenizer: Any, generator: Any, **limits: int) -> GatewayRollout:
    return GatewayRollout(
        tokenizer, generator, GatewayConfig(program=PROGRAM, sampling=PLAIN, n=1, concurrency=1, **{**LIMITS, **limits})
    )


def outcome(out: Any) -> tuple[int, float, bool, str, bool]:
    """The rollout's rows, and its first row's reward, success, status and whether it failed."""
    nt = out.non_tensor_batch
    return len(out), nt["reward_total"][0], nt["success"][0], nt["status"][0], nt["failed"][0]


def decode(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def expert_policy(tokenizer: Any, actions: list[str], replies: list[list[int]]) -> Callable[[list[int], int], Reply]:
    """A policy that reads the page in the prompt's last message and answers with the expert's action as a tool
    call; records each action and reply."""
    expert = WebShopExpert()

    def policy(prompt_ids: list[int], seed: int) -> Reply:
        last = decode(tokenizer, prompt_ids).rsplit("<|im_start|>", 2)[-2]  # "user\n<page><|im_end|>\n" or "tool\n..."
        page = last.partition("\n")[2].removesuffix("<|im_end|>\n")
        actions.append(expert.act(page))
        name, value = ACTION.fullmatch(actions[-1]).groups()
        call = {"name": name, "arguments": {"query" if name == "search" else "target": value}}
        replies.append(tokenizer.encode(f"<tool_call>{json.dumps(call)}</tool_call>", add_special_tokens=False) + [EOT])
        return replies[-1], "stop"

    return policy


def open_envs(url: str) -> list[int]:
    return requests.get(f"{url}/list_envs", timeout=10).json()


def page_after(url: str, goal: int, act: str) -> str:
    """The page a fresh env of ``goal`` shows after the action ``act``."""
    env = requests.post(f"{url}/create", timeout=10).json()
    requests.post(f"{url}/reset", json={"env_idx": env, "session_id": goal}, timeout=10).raise_for_status()
    page = requests.post(f"{url}/step", json={"env_idx": env, "action": act}, timeout=10).json()["state"]
    requests.post(f"{url}/close", json={"env_idx": env}, timeout=10).raise_for_status()
    return page


def test_tool_calls_become_env_actions():
    assert action("search", '{"query": " red mug "}') == "search[red mug]"
    assert action("click", '{"target": "Buy Now"}') == "click[Buy Now]"
    assert [
        action(*call)
        for call in [
            ("click", '{"query": "x"}'),
            ("buy", '{"target": "x"}'),
            ("click", "x"),
            ("click", '["x"]'),
            ("search", '{"query": " "}'),
            ("click", '{"target": 3}'),
        ]
    ] == [None] * 6


def test_a_page_is_cut_to_its_whole_elements_within_the_limit():
    page = "Instruction: [SEP] red mug [SEP] Back to Search [SEP] B0ABC [SEP] Red Mug, 12 oz"
    assert page_view(page, limit=len(page)) == page
    assert page_view(page, limit=len(page) - 1) == "Instruction: [SEP] red mug [SEP] Back to Search [SEP] B0ABC"
    assert page_view(page, limit=46) == "Instruction: [SEP] red mug"  # " [SEP] Back to Search" ends at 47
    assert page_view(page, limit=47) == "Instruction: [SEP] red mug [SEP] Back to Search"
    assert page_view("abcdefgh", limit=5) == "abcde"  # no element fits: the first characters
    assert MAX_PAGE_CHARS == 1000


def test_the_server_comes_from_the_row_then_the_environment(monkeypatch):
    monkeypatch.delenv("WEBSHOP_URL", raising=False)
    assert env_url({"extra_info": {"index": 3}}) == DEFAULT_ENV_URL == "http://127.0.0.1:36001"
    monkeypatch.setenv("WEBSHOP_URL", "http://shop:1")
    assert env_url({"extra_info": {"index": 3}}) == "http://shop:1"
    assert env_url({"extra_info": {"index": 3, "env_url": "http://row:2"}}) == "http://row:2"


@pytest.mark.slow
def test_the_experts_tool_calls_buy_the_product_in_one_exact_sample(tokenizer, webshop_server, monkeypatch):
    monkeypatch.setenv("WEBSHOP_URL", webshop_server.url)
    actions: list[str] = []
    replies: list[list[int]] = []
    generator = ScriptedGenerator(expert_policy(tokenizer, actions, replies))
    before = open_envs(webshop_server.url)
    with rollout(tokenizer, generator) as r:
        out = r.run_llm_loop(task_batch([GOAL]))

    assert outcome(out) == (1, 1.0, True, "done", False)
    nt = out.non_tensor_batch
    assert nt["program_info"][0] == {"success": True}
    assert actions[0].startswith("search[") and actions[-1] == "click[Buy Now]"
    assert len(generator.calls) == len(actions) == nt["num_turns"][0]

    prompts = [call["prompts"][0] for call in generator.calls]
    prompt, response, mask, log_probs = row(out, 0)
    assert (
        prompt == prompts[0]
        and decode(tokenizer, prompt).endswith("<|im_start|>assistant\n")
        and "Instruction: [SEP]" in decode(tokenizer, prompt)
    )
    assert response == prompts[-1][len(prompt) :] + replies[-1]
    expected_mask = [0] * len(response)
    for p, ids in zip(prompts, replies):  # each reply sits where its call's prompt ended
        start = len(p) - len(prompt)
        assert response[start : start + len(ids)] == ids
        expected_mask[start : start + len(ids)] = [1] * len(ids)
    assert mask == expected_mask
    assert log_probs == [-0.25 if m else 0.0 for m in mask]
    assert open_envs(webshop_server.url) == before
    # the search's result came back as a tool message holding the results page cut to its first elements
    results = page_after(webshop_server.url, GOAL, actions[0])
    assert "[SEP] Page 1 (Total results: " in results and len(results) > MAX_PAGE_CHARS
    assert results.startswith(page_view(results)) and len(page_view(results)) > MAX_PAGE_CHARS - 200
    assert decode(tokenizer, prompts[1][len(prompts[0]) + len(replies[0]) :]) == (
        f"\n<|im_start|>tool\n{page_view(results)}<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.slow
def test_a_model_that_never_calls_a_tool_stops_at_the_turn_cap(tokenizer, webshop_server):
    generator = ScriptedGenerator(text_policy(tokenizer, lambda prompt: "I will think about it."))
    batch = task_batch([GOAL], extra_info=[{"index": GOAL, "split": "test", "env_url": webshop_server.url}])
    with rollout(tokenizer, generator) as r:
        out = r.run_llm_loop(batch)

    assert outcome(out) == (1, 0.0, False, "done", False)
    nt = out.non_tensor_batch
    assert nt["program_info"][0] == {"success": False}
    assert len(generator.calls) == nt["num_turns"][0] == MAX_TURNS == 10
    last = decode(tokenizer, generator.calls[-1]["prompts"][0])
    assert last.endswith(
        f"I will think about it.<|im_end|>\n<|im_start|>user\n{NUDGE}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert last.count(NUDGE) == MAX_TURNS - 1
    reply = tokenizer.encode("I will think about it.", add_special_tokens=False) + [EOT]
    assert sum(row(out, 0)[2]) == MAX_TURNS * len(reply)


@pytest.mark.slow
def test_an_episode_that_outgrows_the_token_budget_ends_truncated_with_reward_0(tokenizer, webshop_server, monkeypatch):
    """The results page does not fit after the search: the gateway answers context_length_exceeded and the
    agent stops (a kept row with reward 0, not a failed one)."""
    monkeypatch.setenv("WEBSHOP_URL", webshop_server.url)
    actions: list[str] = []
    generator = ScriptedGenerator(expert_policy(tokenizer, actions, []))
    with rollout(tokenizer, generator, max_trajectory_length=1024 + 128) as r:
        out = r.run_llm_loop(task_batch([GOAL]))

    assert outcome(out) == (1, 0.0, False, "truncated", False)
    assert len(actions) == 1 and actions[0].startswith("search[")
