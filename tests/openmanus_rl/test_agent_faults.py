"""Env failures during rollouts, with real WebShop server processes: a server killed mid-episode and a hung one."""

import time

import pytest
from agent_helpers import PLAIN, ScriptedGenerator, task_batch, text_policy

from openmanus_rl.agent import OpenManusAgent

pytestmark = pytest.mark.slow


def searcher(tokenizer):
    return text_policy(tokenizer, lambda prompt: "Thought: look around\nAction: search[cotton shirt]")


def config(*servers, **overrides):
    return {
        "env_ports": [s.port for s in servers],
        "max_turns": 3,
        "max_response_length": 32,
        "max_obs_length": 64,
        "env_retries": 1,
        "env_retry_backoff_s": 0.05,
        "sampling": PLAIN,
        **overrides,
    }


def check_failed_rows_are_masked_out(out, bad_url, error):
    nt, b = out.non_tensor_batch, out.batch
    bad = [i for i in range(len(out)) if nt["env_server"][i] == bad_url]
    good = [i for i in range(len(out)) if i not in bad]
    assert len(bad) == 2 and len(good) == 2  # the pool put two episodes on each server
    for i in bad:
        assert (nt["failed"][i], nt["status"][i], nt["success"][i]) == (True, "failed", False)
        assert error in nt["error"][i] and nt["trajectory"][i][-1]["role"] == "error"
        assert b["response_mask"][i].sum() == 0 and nt["reward_total"][i] == 0.0
        assert b["rollout_log_probs"][i].abs().sum() == 0
        assert b["attention_mask"][i].sum() > 0  # the tokens are there, only excluded from the loss
    for i in good:
        assert (nt["failed"][i], nt["status"][i], nt["num_turns"][i]) == (False, "turn_limit", 3)
        assert b["response_mask"][i].sum() > 0
    return bad, good


def test_server_killed_mid_episode(tokenizer, spawn_server):
    a, b = spawn_server("webshop"), spawn_server("webshop")
    generator = ScriptedGenerator(searcher(tokenizer), before_call=lambda call: b.kill() if call == 1 else None)
    with OpenManusAgent(tokenizer, generator, config(a, b, env_cooldown_s=3.0)) as agent:
        out = agent.run_llm_loop(task_batch([0, 1, 2, 3]))
        killed_at = time.monotonic()
        check_failed_rows_are_masked_out(out, b.url, "EnvConnectionError")
        m = out.meta_info["metrics"]
        assert (m["env/failed_trajectories"], m["env/errors"], m["env/turns/mean"]) == (2.0, 2.0, 3.0)

        # the pool routes around the dead server: the next batch runs on the live one, nothing fails
        again = agent.run_llm_loop(task_batch([4, 5, 6, 7]))
        assert set(again.non_tensor_batch["env_server"]) == {a.url}
        assert not any(again.non_tensor_batch["failed"]) and again.meta_info["metrics"]["env/errors"] == 0.0

        # restarted on its port, the server takes episodes again once its cooldown is over
        b.start()
        time.sleep(max(0.0, killed_at + 3.2 - time.monotonic()))
        back = agent.run_llm_loop(task_batch([8, 9, 10, 11]))
        assert set(back.non_tensor_batch["env_server"]) == {a.url, b.url}
        assert not any(back.non_tensor_batch["failed"])


def test_hung_server_times_out(tokenizer, spawn_server, webshop_server):
    hung = spawn_server("webshop")
    generator = ScriptedGenerator(searcher(tokenizer), before_call=lambda call: hung.pause() if call == 1 else None)
    try:
        with OpenManusAgent(tokenizer, generator, config(webshop_server, hung, request_timeout_s=1.0)) as agent:
            start = time.monotonic()
            out = agent.run_llm_loop(task_batch([0, 1, 2, 3]))
            elapsed = time.monotonic() - start
        check_failed_rows_are_masked_out(out, hung.url, "EnvTimeoutError")
        assert "no answer within 1s" in out.non_tensor_batch["error"][1]
        assert elapsed < 5.0  # the two hung steps time out in parallel after ~1 s, not retried
        assert out.meta_info["metrics"]["env/failed_trajectories"] == 2.0
    finally:
        hung.resume()
        hung.stop()
