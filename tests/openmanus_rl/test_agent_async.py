"""The asynchronous rollout mode: no turn barrier, the same trajectories as the turn-synchronous mode.

Real WebShop servers throughout; a scripted streaming generator where the test
needs valid actions (a random tiny model rarely writes one), the real in-process
vLLM engine (tiny fp32 model) and the HF fallback engine otherwise.
"""

import time

import pytest
import torch
from agent_helpers import SMALL_AGENT, StreamingScriptedGenerator, task_batch, text_policy

from openmanus_rl.agent import AgentConfig, OpenManusAgent, trajectory_seed, turn_seed

pytestmark = pytest.mark.in_process_engine

CONFIG = SMALL_AGENT
SLOW_S = 2.0


def test_rollout_mode_is_checked():
    with pytest.raises(ValueError, match=r"rollout_mode must be one of \['async', 'sync'\], got 'batched'"):
        AgentConfig(rollout_mode="batched").validate()
    assert AgentConfig().rollout_mode == "async"


def test_max_in_flight_is_checked():
    assert AgentConfig().max_in_flight == 0
    with pytest.raises(ValueError, match=r"max_in_flight must be an int >= 0 \(0: every trajectory at once\), got -1"):
        AgentConfig(max_in_flight=-1).validate()
    with pytest.raises(ValueError, match=r"max_in_flight=4 applies to the async rollout .* not rollout_mode='sync'"):
        AgentConfig(max_in_flight=4, rollout_mode="sync").validate()


def searcher(tokenizer):
    return StreamingScriptedGenerator(
        text_policy(tokenizer, lambda prompt: "Thought: look\nAction: search[cotton shirt]")
    )


def slowed(agent, method, task_id, seen):
    """Make ``agent.<method>`` (an env call) take SLOW_S longer for ``task_id``'s trajectories; when the first
    such call returns, record every other trajectory's (num_turns, status) in ``seen``."""
    inner = getattr(agent, method)

    def call(item):
        t = item[0] if isinstance(item, tuple) else item
        inner(item)
        if t.task_id == task_id and not seen:
            time.sleep(SLOW_S)
            seen.append(
                sorted((o.task_id, o.copy, o.num_turns, o.status) for o in agent.running if o.task_id != task_id)
            )

    setattr(agent, method, call)


class Watched(OpenManusAgent):
    """Keeps the trajectories of the rollout under way in ``running`` (to look at them from a slowed env call)."""

    def _trajectories(self, gen_batch, global_step):
        self.running = super()._trajectories(gen_batch, global_step)
        return self.running


def rollout(tokenizer, generator, config, tasks, slow=None, **kwargs):
    """Roll ``tasks`` out; with ``slow=(method, task_id)``, also what the others had done when that call returned."""
    seen = []
    with Watched(tokenizer, generator, config) as agent:
        if slow:
            slowed(agent, *slow, seen)
        out = agent.run_llm_loop(task_batch(tasks), global_step=3, **kwargs)
    return out, seen


def assert_same_trajectories(a, b, log_prob_atol=0.0):
    for key in ("prompts", "responses", "response_mask", "attention_mask"):
        assert torch.equal(a.batch[key], b.batch[key]), key
    assert torch.allclose(a.batch["rollout_log_probs"], b.batch["rollout_log_probs"], rtol=0, atol=log_prob_atol)
    for key in ("task_id", "num_turns", "status", "reward_total", "failed"):
        assert list(a.non_tensor_batch[key]) == list(b.non_tensor_batch[key]), key
    assert [[turn["text"] for turn in r] for r in a.non_tensor_batch["trajectory"]] == [
        [turn["text"] for turn in r] for r in b.non_tensor_batch["trajectory"]
    ]


@pytest.mark.slow
def test_a_slow_env_step_holds_back_only_its_own_trajectory(tokenizer, webshop_server):
    config = {**CONFIG, "n": 1, "env_ports": [webshop_server.port]}
    out, seen = rollout(tokenizer, searcher(tokenizer), config, [0, 1, 2], slow=("_step", 0))
    # while task 0's first step was out, the others played all their turns (every action is a valid search)
    assert seen == [[(1, 0, 3, "turn_limit"), (2, 0, 3, "turn_limit")]]
    assert list(out.non_tensor_batch["num_turns"]) == [3, 3, 3]

    sync_out, seen = rollout(
        tokenizer, searcher(tokenizer), {**config, "rollout_mode": "sync"}, [0, 1, 2], slow=("_step", 0)
    )
    assert seen == [[(1, 0, 1, "running"), (2, 0, 1, "running")]]  # the turn barrier: everyone waited at turn 1
    assert_same_trajectories(out, sync_out)


@pytest.mark.slow
def test_streamed_requests_carry_ids_routes_seeds_and_exact_prompts(tokenizer, webshop_server):
    generator = searcher(tokenizer)
    out, _ = rollout(tokenizer, generator, {**CONFIG, "env_ports": [webshop_server.port]}, [5, 6])
    by_id = {rid: (prompt, seed) for rid, prompt, seed in generator.submitted}
    assert sorted(by_id) == sorted(f"1:{i}:{turn}" for i in range(4) for turn in range(3))
    assert generator.meta_info == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_tokens": 24,
        "stop_token_ids": [2],
        "do_sample": True,
    }
    b = out.batch
    P = b["prompts"].shape[1]
    for i in range(4):  # row i = trajectory i = (task row i // 2, copy i % 2)
        seed = trajectory_seed(1, 3, f"webshop:{(5, 6)[i // 2]}", i % 2)
        prompt = b["prompts"][i][b["attention_mask"][i, :P] == 1].tolist()
        response = b["responses"][i].tolist()
        starts = [0] + [
            s for s in range(1, len(response)) if b["response_mask"][i, s - 1] == 0 and b["response_mask"][i, s] == 1
        ]
        assert len(starts) == 3
        for turn, s in enumerate(starts):  # each turn's prompt is the trajectory so far, token for token
            assert by_id[f"1:{i}:{turn}"] == (prompt + response[:s], turn_seed(seed, turn))


@pytest.mark.slow
def test_a_failed_rollout_cancels_its_requests(tokenizer, webshop_server):
    calls = []

    def policy(prompt, seed):
        calls.append(seed)
        if len(calls) == 3:
            raise RuntimeError("engine fault")
        return [2], "stop"

    generator = StreamingScriptedGenerator(policy)
    with OpenManusAgent(tokenizer, generator, {**CONFIG, "env_ports": [webshop_server.port]}) as agent:
        with pytest.raises(RuntimeError, match="engine fault"):
            agent.run_llm_loop(task_batch([0, 1]))
        assert generator.cancelled == 1
        assert sum(agent.envs["webshop"].pool.leased().values()) == 0  # every env client went back to the pool


# ---------------------------------------------------------------------------- real engines


def hf_rollout_worker(model_path):
    """The HF fallback engine (the vLLM one is the session's ``vllm_engine``)."""
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    worker = ActorRolloutRefWorker(
        {
            "model": {"path": model_path},
            "num_threads": 1,
            "rollout": {"name": "hf", "dtype": "float32", "max_model_len": 1024},
        },
        role="rollout",
    )
    worker.init_model()
    return worker


@pytest.mark.slow
def test_a_window_runs_at_most_max_in_flight_trajectories_and_plays_the_same_episodes(tokenizer, webshop_server):
    config = {**CONFIG, "n": 1, "env_ports": [webshop_server.port]}
    tasks = [0, 1, 2, 3, 4, 5]
    everyone, _ = rollout(tokenizer, searcher(tokenizer), config, tasks)
    generator = searcher(tokenizer)
    with OpenManusAgent(tokenizer, generator, {**config, "max_in_flight": 2}) as agent:
        windowed = agent.run_llm_loop(task_batch(tasks), global_step=3)
        stats = dict(agent.envs["webshop"].pool.stats)
    assert_same_trajectories(windowed, everyone)
    # at most two envs made (all six at once would make six); a finished trajectory's env is reset for the next task
    assert stats["created"] <= 2 and stats["created"] + stats["reused"] == 6, stats
    # trajectories start in order, each once another has finished: when trajectory i submits its first turn, at
    # least i - 1 of the i before it have submitted their last (3 turns each: every action is a valid search)
    order = [rid for rid, _, _ in generator.submitted]
    for i in range(2, 6):
        finished_before = [j for j in range(i) if order.index(f"1:{j}:2") < order.index(f"1:{i}:0")]
        assert len(finished_before) >= i - 1, (i, order)


@pytest.mark.slow
def test_vllm_async_and_sync_give_the_same_trajectories(tokenizer, vllm_engine, webshop_server):
    config = {**CONFIG, "env_ports": [webshop_server.port]}
    before = vllm_engine.prefix_cache_stats()
    out, _ = rollout(tokenizer, vllm_engine, config, [0, 1, 2])
    after = vllm_engine.prefix_cache_stats()
    sync_out, _ = rollout(tokenizer, vllm_engine, {**config, "rollout_mode": "sync"}, [0, 1, 2])
    # the same tokens; their log-probs come from batches of other make-ups, summed in another order
    # by fp32 kernels (1e-6 apart on an AVX2 box; bit-identical where the engine runs bf16)
    assert_same_trajectories(out, sync_out, log_prob_atol=1e-5)
    assert not any(out.non_tensor_batch["failed"]) and set(out.non_tensor_batch["num_turns"]) == {3}
    # later turns find their trajectory's earlier tokens in the prefix cache
    assert after["requests"] - before["requests"] == 18
    assert after["hits"] > before["hits"]


@pytest.mark.slow
def test_vllm_slow_env_start_holds_back_only_its_own_trajectory(tokenizer, vllm_engine, webshop_server):
    config = {**CONFIG, "n": 1, "env_ports": [webshop_server.port]}
    out, seen = rollout(tokenizer, vllm_engine, config, [0, 1, 2], slow=("_start", 0))
    assert seen == [[(1, 0, 3, "turn_limit"), (2, 0, 3, "turn_limit")]]
    _, seen = rollout(tokenizer, vllm_engine, {**config, "rollout_mode": "sync"}, [0, 1, 2], slow=("_start", 0))
    assert seen == [[(1, 0, 0, "running"), (2, 0, 0, "running")]]
    assert list(out.non_tensor_batch["num_turns"]) == [3, 3, 3]


@pytest.mark.slow
def test_hf_engine_serves_the_async_mode(tokenizer, tiny_model_path, webshop_server):
    worker = hf_rollout_worker(tiny_model_path)
    config = {**CONFIG, "n": 1, "max_turns": 2, "env_ports": [webshop_server.port]}
    with OpenManusAgent(tokenizer, worker, config) as agent:
        assert agent.streams
    out, _ = rollout(tokenizer, worker, config, [0, 1], do_sample=False)
    sync_out, _ = rollout(tokenizer, worker, {**config, "rollout_mode": "sync"}, [0, 1], do_sample=False)
    assert list(out.non_tensor_batch["num_turns"]) == [2, 2] and not any(out.non_tensor_batch["failed"])
    # HF pads a batch to its longest prompt: other batch-mates move the log-probs in the last float bits
    assert_same_trajectories(out, sync_out, log_prob_atol=1e-4)


def played(outs):
    """Each trajectory of a run, in task order: task, turn count, status, reward, its response tokens (model and
    observation turns, unpadded) and its turns' texts."""
    rows = []
    for out in outs:
        width = out.batch["prompts"].shape[1]
        nt = out.non_tensor_batch
        for i in range(len(out)):
            tokens = out.batch["responses"][i][out.batch["attention_mask"][i, width:] == 1].tolist()
            rows.append(
                (
                    nt["task_id"][i],
                    nt["num_turns"][i],
                    nt["status"][i],
                    nt["reward_total"][i],
                    tokens,
                    [turn["text"] for turn in nt["trajectory"][i]],
                )
            )
    return rows


@pytest.mark.slow
def test_trajectories_do_not_depend_on_batch_split_servers_or_rollout_mode(
    tokenizer, vllm_engine, webshop_server, spawn_server
):
    """20 tasks, greedy and sampled (2 copies each), run four ways: in one batch on one server (async), in batches of
    7 on two servers (sync), in batches of 3 on three servers (async), in one batch on two servers with at most 5
    trajectories in flight (async).  Every trajectory is the same: its seed comes
    from (seed, step, task, copy), never from its place in a batch, and each server gives a task the same episode."""
    servers = [webshop_server, spawn_server("webshop"), spawn_server("webshop")]
    tasks = list(range(20))
    for n, do_sample in ((1, False), (2, True)):
        runs = []
        for batch, n_servers, mode, window in (
            (20, 1, "async", 0),
            (7, 2, "sync", 0),
            (3, 3, "async", 0),
            (20, 2, "async", 5),
        ):
            config = {
                **CONFIG,
                "n": n,
                "max_turns": 2,
                "rollout_mode": mode,
                "max_in_flight": window,
                "env_ports": [server.port for server in servers[:n_servers]],
            }
            with OpenManusAgent(tokenizer, vllm_engine, config) as agent:
                outs = [
                    agent.run_llm_loop(task_batch(tasks[i : i + batch]), do_sample=do_sample, global_step=0)
                    for i in range(0, len(tasks), batch)
                ]
            runs.append(played(outs))
        assert [row[0] for row in runs[0]] == [task for task in tasks for _ in range(n)]
        assert not any(row[2] == "failed" for row in runs[0])
        assert runs[1] == runs[0] and runs[2] == runs[0] and runs[3] == runs[0], (n, do_sample)
