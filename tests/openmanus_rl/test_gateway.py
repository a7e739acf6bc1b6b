"""The gateway rollout end to end: agent programs talk to the real server through the real ``openai``
client; the packed rows hold exactly the ids and log-probs the generator returned."""

from __future__ import annotations

import json

import gateway_helpers as gh
import pytest
from agent_helpers import PLAIN, task_batch
from gateway_helpers import EOT, ReplayGenerator, StreamingReplayGenerator, log_probs_for, row
from waiting import wait_until

from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.agent.trajectory import Trajectory
from openmanus_rl.gateway import GatewayConfig, GatewayRollout
from openmanus_rl.gateway.plugin import PLUGIN
from openmanus_rl.gateway.session import call_seed
from verl.trainer.ppo.reward import RewardManager
from verl.trainer.ppo.rollout import load_rollout_plugin
from verl.utils.reward_score import register_reward_score
from verl.workers.config import RolloutConfig

LIMITS = {"max_prompt_length": 512, "max_response_length": 48, "max_trajectory_length": 1024}


def rollout(tokenizer, generator, program: str, **config) -> GatewayRollout:
    """One episode at a time unless ``concurrency`` says otherwise: a `ReplayGenerator` answers in call order."""
    return GatewayRollout(
        tokenizer,
        generator,
        GatewayConfig(
            program=f"gateway_helpers:{program}", sampling=PLAIN, **{"n": 1, "concurrency": 1, **LIMITS, **config}
        ),
    )


def said(tokenizer, text: str, reason: str = "stop") -> tuple[list[int], str]:
    """A reply: ``text``'s ids and the end-of-turn token."""
    return tokenizer.encode(text, add_special_tokens=False) + [EOT], reason


def text(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False)


def test_an_episode_succeeds_by_the_programs_flag_else_by_a_reward_of_one():
    from openmanus_rl.gateway.episodes import Outcome
    from openmanus_rl.gateway.output import Episode, build_batch
    from openmanus_rl.gateway.session import Sample, Session

    def episode(row: int) -> Episode:
        session = Session(f"s{row}", "key", None, f"seed{row}", 0)
        session.samples = [Sample([5, 6], [7, EOT], [1, 1], [-0.1, -0.2], [1])]
        return Episode(row, 0, f"u{row}", row, {"data_source": "toy"}, session, "http://127.0.0.1:1")

    outcomes = [
        Outcome(1.0, "program", {"success": False}),  # the flag wins over the reward, both ways
        Outcome(0.5, "program", {"success": True}),
        Outcome(1.0, "episode"),
        Outcome(0.9, "episode"),  # no flag: reward >= 1
        Outcome(1.0, "program", {"success": "yes"}),  # not a bool: not a flag
        Outcome(1.0, "program", {"success": True}, error="TimeoutError: episode"),
    ]  # a failed row never succeeds
    out = build_batch([episode(i) for i in range(6)], outcomes, {}, pad_id=0, eot_id=EOT)
    assert list(out.non_tensor_batch["success"]) == [False, True, True, False, True, False]


@pytest.mark.parametrize("streams", [False, True], ids=["generate_sequences", "streaming"])
def test_three_turn_tool_conversation_is_one_exact_sample(tokenizer, streams):
    calls = [
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>',
        'Next: <tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>',
        "The sum is 7.",
    ]
    replies = [said(tokenizer, c) for c in calls]
    generator = (StreamingReplayGenerator if streams else ReplayGenerator)(replies)
    batch = task_batch([4], prompt=[[{"role": "user", "content": "What is 1+2, then 3+4?"}]])
    with rollout(tokenizer, generator, "tool_episode") as r:
        out = r.run_llm_loop(batch, global_step=2)

    assert len(out) == 1 and generator.prompts[1][: len(generator.prompts[0])] == generator.prompts[0]
    prompt, response, mask, log_probs = row(out, 0)
    assert prompt == generator.prompts[0]
    assert text(tokenizer, prompt).startswith(
        "<|im_start|>system\nYou can call these tools (one JSON schema per line):\n"
        '{"name": "add", "description": "Add two integers.",'
    )
    assert text(tokenizer, prompt).endswith(
        "<|im_end|>\n<|im_start|>user\nWhat is 1+2, then 3+4?<|im_end|>\n<|im_start|>assistant\n"
    )

    def gap(result: str) -> list[int]:
        return tokenizer.encode(
            f"\n<|im_start|>tool\n{result}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
        )

    (r0, _), (r1, _), (r2, _) = replies
    assert response == r0 + gap("3") + r1 + gap("7") + r2
    assert mask == [1] * len(r0) + [0] * len(gap("3")) + [1] * len(r1) + [0] * len(gap("7")) + [1] * len(r2)
    assert log_probs == (
        log_probs_for(0, len(r0))
        + [0.0] * len(gap("3"))
        + log_probs_for(1, len(r1))
        + [0.0] * len(gap("7"))
        + log_probs_for(2, len(r2))
    )
    assert generator.prompts[1] == prompt + r0 + gap("3") and generator.prompts[2] == prompt + response[: -len(r2)]
    nt = out.non_tensor_batch
    assert nt["turn_ends"][0] == [len(r0) - 1, len(r0) + len(gap("3")) + len(r1) - 1, len(response) - 1]
    assert (nt["reward_total"][0], nt["success"][0], nt["num_turns"][0], nt["status"][0]) == (0.75, True, 3, "done")
    assert nt["program_info"][0] == {"success": True, "answer": "The sum is 7."}
    key = "1:2:4:0"
    assert generator.seeds == [call_seed(key, 0), call_seed(key, 1), call_seed(key, 2)]
    assert generator.metas[0] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_tokens": 48,
        "stop_token_ids": [EOT],
        "stop": [],
        "do_sample": True,
    }
    if streams:
        assert generator.routes == [0, 0, 0]
    metrics = out.meta_info["metrics"]
    expected = {
        "gateway/calls": 3.0,
        "gateway/prefix_breaks": 0.0,
        "gateway/failed_episodes": 0.0,
        "gateway/samples": 1.0,
        "rollout/generated_tokens": float(len(r0) + len(r1) + len(r2)),
    }
    assert {k: metrics[k] for k in expected} == expected

    # the reward path pays the program's reward, not the module webshop rows would pick
    assert RewardManager(tokenizer)(out) == {"reward/episode/mean": 0.75, "reward/errors": 0.0}
    assert out.batch["token_level_scores"][0, len(response) - 1].item() == 0.75


def test_the_engine_sees_the_sampled_text_and_unparsable_blocks_stay_content(tokenizer):
    replies = [
        said(tokenizer, 'Let me add. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'),
        said(tokenizer, "<tool_call>not json</tool_call>"),
        said(tokenizer, "3"),
    ]
    seen = []

    class Recording(ReplayGenerator):
        def answer(self, prompt, seed, meta):
            seen.append(tokenizer.decode(prompt, skip_special_tokens=False))
            return super().answer(prompt, seed, meta)

    generator = Recording(replies)
    with rollout(tokenizer, generator, "tool_episode") as r:
        out = r.run_llm_loop(task_batch([0], prompt=[[{"role": "user", "content": "1+2?"}]]))
    # the unparsable block stayed content: tool_episode then read tool_calls[0] of None and failed
    assert out.non_tensor_batch["error"][0] == "TypeError: 'NoneType' object is not subscriptable"
    # the second prompt holds the reply as sampled ("Let me add. <tool_call>"), not as the gateway would
    # render the returned message (content "Let me add.", then the call on a line of its own)
    assert seen[1].endswith(
        "<|im_start|>user\n1+2?<|im_end|>\n<|im_start|>assistant\nLet me add. "
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call><|im_end|>\n'
        "<|im_start|>tool\n3<|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_agent_loop_lays_out_the_same_conversation_identically(tokenizer):
    """The built-in agent's layout (`ChatFormat` + `Trajectory`) of the same turns gives the same tensors; the
    second reply stops by length, so both append an end-of-turn token with mask 0."""
    turns = ["Find a red mug.", "Observation: 3 results.", "Observation: added to cart."]
    r0, (r1, _), r2 = said(tokenizer, "search[red mug]"), said(tokenizer, "click[item 1]"), said(tokenizer, "buy")
    r1 = r1[:-1]  # no end-of-turn token: stopped by length
    generator = ReplayGenerator([r0, (r1, "length"), r2])
    with rollout(tokenizer, generator, "chat_episode") as r:
        out = r.run_llm_loop(task_batch([9], extra_info=[{"index": 9, "turns": turns}]))

    chat, t = ChatFormat(tokenizer), Trajectory(0, 0, "u", 9, "webshop", 0)
    t.prompt_ids = chat.prompt_ids(turns[0])
    for k, (ids, _) in enumerate([r0, (r1, "length"), r2]):
        if k:
            t.add_observation_turn(chat.observation_turn_ids(chat.encode(turns[k])))
        t.add_model_turn(ids, log_probs_for(k, len(ids)), chat.eot_id)
    assert row(out, 0) == (t.prompt_ids, t.response_ids, t.response_mask, t.log_probs)
    assert out.non_tensor_batch["turn_ends"][0] == t.turn_ends


def test_rewritten_history_starts_a_second_sample_of_the_same_episode(tokenizer):
    generator = ReplayGenerator([said(tokenizer, "Day 1: Paris."), said(tokenizer, "Day 2: Lyon.")])
    with rollout(tokenizer, generator, "rewriting_episode", n=2) as r:
        out = r.run_llm_loop(task_batch([1]))

    nt = out.non_tensor_batch
    assert len(out) == 4 and list(nt["sample"]) == [0, 1, 0, 1]
    assert len(set(nt["uid"])) == 1 and list(nt["reward_total"]) == [1.0] * 4
    assert list(nt["prefix_breaks"]) == [1, 1, 1, 1] and out.meta_info["metrics"]["gateway/prefix_breaks"] == 2.0
    prompt, response, mask, _ = row(out, 1)
    assert prompt == generator.prompts[1] and text(tokenizer, prompt).endswith(
        "<|im_start|>user\nPlan the trip.<|im_end|>\n<|im_start|>assistant\n(summary of the plan)<|im_end|>\n"
        "<|im_start|>user\nGo on.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert (response, mask) == (said(tokenizer, "Day 2: Lyon.")[0], [1] * len(response))
    first = row(out, 0)
    assert first[0] == generator.prompts[0] and first[1] == said(tokenizer, "Day 1: Paris.")[0]
    # the cost of the rewrite: two samples per episode, sharing the first prompt (and nothing after it)
    a, b = generator.prompts[0] + said(tokenizer, "Day 1: Paris.")[0], generator.prompts[1] + response
    shared = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    assert shared == len(generator.prompts[0])
    metrics = out.meta_info["metrics"]
    assert metrics["gateway/samples/mean"] == 2.0 and metrics["gateway/sample_tokens/mean"] == len(a) + len(b)
    assert metrics["gateway/tree_tokens/mean"] == len(a) + len(b) - shared


def test_sampled_ids_are_kept_where_re_encoding_would_differ(tokenizer):
    """The model spelled "hello" one character per token: the agent's echo renders to other ids, and the
    sample keeps the sampled ones (message-level continuation), with no prefix break."""
    spelled = [tokenizer.convert_tokens_to_ids(ch) for ch in "hello"] + [EOT]
    assert spelled[:-1] != tokenizer.encode("hello", add_special_tokens=False)
    generator = ReplayGenerator([(spelled, "stop"), said(tokenizer, "bye")])
    with rollout(tokenizer, generator, "chat_episode") as r:
        out = r.run_llm_loop(task_batch([0], extra_info=[{"index": 0, "turns": ["hi", "and?"]}]))
    _, response, mask, _ = row(out, 0)
    assert response[:6] == spelled and mask[:6] == [1] * 6
    assert out.meta_info["metrics"]["gateway/prefix_breaks"] == 0.0 and len(out) == 1


def test_raw_text_echo_continues_by_tokens(tokenizer):
    """The agent sends the tool-call reply back as the model's raw text (spacing unlike the gateway's own
    rendering of the call): the fresh rendering's ids start with the sample's, so it continues."""
    raw = '<tool_call>{"name":"add","arguments":{"a":1}}</tool_call>'
    generator = ReplayGenerator([said(tokenizer, raw), said(tokenizer, "1")])
    with rollout(tokenizer, generator, "raw_echo_episode") as r:
        out = r.run_llm_loop(task_batch([0], extra_info=[{"index": 0, "raw": raw}]))
    assert len(out) == 1 and out.meta_info["metrics"]["gateway/prefix_breaks"] == 0.0
    assert (
        generator.prompts[1][: len(generator.prompts[0]) + len(said(tokenizer, raw)[0])]
        == generator.prompts[0] + said(tokenizer, raw)[0]
    )


def test_failed_episodes_are_failed_rows_with_their_error(tokenizer):
    generator = ReplayGenerator([said(tokenizer, "ok")])
    results = {}
    for program in ("raising_episode", "bad_return_episode", "silent_episode", "sleeping_episode"):
        with rollout(tokenizer, generator, program, episode_timeout_s=0.5) as r:
            results[program] = r.run_llm_loop(task_batch([0]))
            if program == "sleeping_episode":  # its late call, after the rollout closed its session
                wait_until(lambda: gh.LATE_CALLS, "the sleeping episode's late call", 3.0)
    expected = {
        "raising_episode": "ValueError: boom",
        "bad_return_episode": "TypeError: the returned reward must be a finite number, got 'yes'",
        "silent_episode": "the program made no model call",
        "sleeping_episode": "the episode timed out after 0.5 s",
    }
    for program, out in results.items():
        nt = out.non_tensor_batch
        assert (nt["failed"][0], nt["status"][0], nt["error"][0]) == (True, "failed", expected[program]), program
        assert out.batch["response_mask"].sum() == 0 and out.batch["rollout_log_probs"].abs().sum() == 0
        assert out.meta_info["metrics"]["gateway/failed_episodes"] == 1.0
    assert results["sleeping_episode"].meta_info["metrics"]["gateway/timed_out_episodes"] == 1.0
    assert row(results["silent_episode"], 0)[:2] == ([EOT], [])
    assert gh.LATE_CALLS == ["404 session_not_found"]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_an_async_program_gives_the_rows_of_the_same_sync_program(tokenizer, concurrency):
    turns = [{"index": i, "turns": ["hi", f"and {i}?"]} for i in range(3)]
    outs = {}
    for program in ("chat_episode", "async_chat_episode"):
        generator = ReplayGenerator([said(tokenizer, "ok")])
        with rollout(tokenizer, generator, program, concurrency=concurrency) as r:
            outs[program] = r.run_llm_loop(task_batch([0, 1, 2], extra_info=turns))
    sync, coro = outs["chat_episode"], outs["async_chat_episode"]
    assert len(coro) == 3 and list(coro.non_tensor_batch["failed"]) == [False] * 3
    assert list(coro.non_tensor_batch["reward_total"]) == [0.5] * 3
    key = lambda out, b: (text(tokenizer, row(out, b)[0]), row(out, b)[1:3])  # noqa: E731 - log-probs follow call order
    assert sorted(key(coro, b) for b in range(3)) == sorted(key(sync, b) for b in range(3))
    assert text(tokenizer, row(coro, 2)[0]).endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert coro.meta_info["metrics"]["gateway/calls"] == 6.0


def test_an_async_program_past_its_deadline_is_cancelled_and_failed(tokenizer):
    gh.ASYNC_EVENTS.clear()
    generator = ReplayGenerator([said(tokenizer, "ok")])
    with rollout(tokenizer, generator, "async_sleeping_episode", episode_timeout_s=1.0) as r:
        out = r.run_llm_loop(task_batch([0]))
        wait_until(lambda: len(gh.ASYNC_EVENTS) >= 2, "the program's call and its cancellation", 3.0)
    nt = out.non_tensor_batch
    assert (nt["failed"][0], nt["error"][0]) == (True, "the episode timed out after 1 s")
    assert out.meta_info["metrics"]["gateway/timed_out_episodes"] == 1.0
    assert gh.ASYNC_EVENTS == ["called", "cancelled"]


def test_a_program_call_cancelled_before_its_coroutine_starts_never_runs_it():
    import asyncio

    from openmanus_rl.gateway.episodes import ProgramCall

    ran = []

    async def program(task, base_url, api_key):
        ran.append(task)
        return 1.0

    assert ProgramCall(program)("first", "url", "key") == 1.0
    call = ProgramCall(program)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        call("second", "url", "key")
    assert ran == ["first"] and ProgramCall(lambda *args: args[0])("sync", "url", "key") == "sync"


def exact(source, text, truth, extra=None) -> float:
    return float(text == truth)


def test_a_program_returning_none_is_scored_by_the_reward_registry(tokenizer):
    register_reward_score("gateway_test_exact", exact, data_sources=("gateway_test",))
    generator = ReplayGenerator([said(tokenizer, "42"), said(tokenizer, "forty-two")])
    batch = task_batch([0, 1], data_source="gateway_test", reward_model=[{"ground_truth": "42"}] * 2)
    with rollout(tokenizer, generator, "unscored_episode") as r:
        out = r.run_llm_loop(batch)
    nt = out.non_tensor_batch
    assert list(nt["reward_total"]) == [1.0, 0.0] and list(nt["scored_by"]) == ["gateway_test_exact"] * 2
    assert out.meta_info["metrics"]["gateway/registry_scored"] == 2.0
    RewardManager(tokenizer, "exact_match")(out)  # rows name their module: algorithm.reward_score_fn does not apply
    assert out.batch["outcome_scores"].tolist() == [1.0, 0.0]


def test_groups_seeds_and_greedy_validation(tokenizer):
    generator = ReplayGenerator([said(tokenizer, "a")])
    with rollout(tokenizer, generator, "chat_episode", n=2, seed=5, concurrency=4) as r:
        out = r.run_llm_loop(
            task_batch([3, 8], extra_info=[{"index": 3, "turns": ["x"]}, {"index": 8, "turns": ["y"]}]), global_step=7
        )
        alone = list(generator.seeds)
        r.run_llm_loop(task_batch([8], extra_info=[{"index": 8, "turns": ["y"]}]), global_step=7, do_sample=False)
    nt = out.non_tensor_batch
    assert list(nt["task_id"]) == [3, 3, 8, 8] and nt["uid"][0] == nt["uid"][1] != nt["uid"][2] == nt["uid"][3]
    assert sorted(alone) == sorted(call_seed(f"5:7:{t}:{c}", 0) for t in (3, 8) for c in (0, 1))
    assert sorted(generator.seeds[4:]) == sorted(call_seed("5:7:8:" + str(c), 0) for c in (0, 1))
    assert [m["do_sample"] for m in generator.metas] == [True] * 4 + [False] * 2


def test_plugin_is_registered_and_checks_its_section(tokenizer):
    from types import SimpleNamespace

    assert load_rollout_plugin("gateway") is PLUGIN
    rollout_cfg = RolloutConfig()
    cfg = lambda **agent: SimpleNamespace(agent=agent, actor_rollout_ref=SimpleNamespace(rollout=rollout_cfg))  # noqa: E731
    PLUGIN.validate(cfg(program="gateway_helpers:tool_episode", env_name="webshop"))
    with pytest.raises(
        ValueError,
        match=r"^unknown key\(s\) \['temperature'\]; the gateway's keys: \['concurrency', 'episode_timeout_s', ",
    ):
        PLUGIN.validate(cfg(program="gateway_helpers:tool_episode", temperature=0.5))
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['programme'\]"):
        PLUGIN.validate(cfg(programme="gateway_helpers:tool_episode"))
    with pytest.raises(ValueError, match=r"program is required: \+agent.program=package.module:function"):
        PLUGIN.validate(cfg())
    with pytest.raises(ValueError, match=r"program 'gateway_helpers:nothing' cannot be loaded"):
        PLUGIN.validate(cfg(program="gateway_helpers:nothing"))
    assert PLUGIN.response_budget(cfg(program="x:y", max_prompt_length=100, max_trajectory_length=300)) == 200


def test_records_name_every_call(tokenizer, tmp_path):
    generator = ReplayGenerator([said(tokenizer, "a")])
    with rollout(tokenizer, generator, "chat_episode") as r:
        r.run_llm_loop(
            task_batch([2], extra_info=[{"index": 2, "turns": ["x", "y"]}]), global_step=3, output_dir=str(tmp_path)
        )
    [record] = [json.loads(line) for line in (tmp_path / "rollouts" / "step_000003.jsonl").read_text().splitlines()]
    assert [(c["sample"], c["reply"], c["content"], c["finish_reason"]) for c in record["calls"]] == [
        (0, "a<|im_end|>", "a", "stop")
    ] * 2
    assert (record["status"], record["reward"], record["scored_by"], record["prefix_breaks"]) == (
        "done",
        0.5,
        "program",
        0,
    )
