"""Worker groups on real Ray: dispatch, errors, FSDP equivalence, vLLM rollout and weight sync, checkpoints, critic."""

from pathlib import Path

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.single_controller.base import Dispatch, Worker, register
from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup, ResourceError, WorkerError
from verl.utils.batch import packed_proto
from verl.workers.fsdp_workers import ActorRolloutRefWorker, CriticWorker

pytestmark = [pytest.mark.slow, pytest.mark.in_process_engine]
PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}  # the model's own distribution: every call carries its sampling


class EchoWorker(Worker):
    @register(Dispatch.DP_COMPUTE_PROTO)
    def tag(self, data: DataProto) -> DataProto:
        return DataProto.from_dict(
            {"x2": data.batch["x"] * 2, "rank": torch.full((len(data),), self.rank)},
            {"uid": data.non_tensor_batch["uid"]},
        )

    @register(Dispatch.ONE_TO_ALL)
    def add(self, a, b=0):
        return (self.rank, a + b)

    @register(Dispatch.ALL_TO_ALL)
    def own(self, item):
        return (self.rank, item)

    @register(Dispatch.RANK_ZERO)
    def who(self):
        return self.rank

    @register(Dispatch.ONE_TO_ALL)
    def fail_on(self, rank):
        if self.rank == rank:
            raise ValueError(f"deliberate failure on rank {self.rank}")
        return "ok"

    @register(Dispatch.ROUTE_PROTO)
    def routed(self, data: DataProto) -> DataProto:
        return DataProto.from_dict(
            non_tensors={"route": data.non_tensor_batch["route"], "rank": [self.rank] * len(data)}
        )

    @register(Dispatch.ALL_TO_ALL_CONCAT)
    def ranks(self, copies: int) -> DataProto:
        return DataProto.from_dict(non_tensors={"rank": [self.rank] * copies})

    @register(Dispatch.ONE_TO_ALL, blocking=False)
    def later(self):
        return self.world_size


class GateWorker(Worker):
    """``hold`` waits (default group) until ``open_gate`` (the "side" group) runs, at most ``timeout_s``."""

    def __init__(self):
        super().__init__()
        import threading

        self.gate = threading.Event()

    @register(Dispatch.ONE_TO_ALL, blocking=False)
    def hold(self, timeout_s: float) -> str:
        return "opened" if self.gate.wait(timeout_s) else "timed out"

    @register(Dispatch.ONE_TO_ALL, concurrency_group="side")
    def open_gate(self) -> str:
        self.gate.set()
        return "set"


def group(cls, n, cpus=0.5, concurrency_groups=None, **init):
    pool = RayResourcePool([n], cpus_per_worker=cpus)
    return RayWorkerGroup(pool, RayClassWithInitArgs(cls, **init), concurrency_groups=concurrency_groups), pool


@pytest.mark.parametrize("groups, held", [({"side": 1}, ["opened"]), (None, ["timed out"])])
def test_a_concurrency_group_runs_beside_a_call_in_progress(ray_local, groups, held):
    # with the group, open_gate runs while hold waits; without it, open_gate queues behind hold
    wg, pool = group(GateWorker, 1, concurrency_groups=groups)
    try:
        waiting = wg.hold(20.0 if groups else 2.0)
        assert wg.open_gate() == ["set"]
        assert waiting.get() == held
    finally:
        close_group(wg, pool)


def close_group(wg, pool):
    wg.shutdown()
    pool.release()


def test_dispatch_modes_split_and_gather(ray_local):
    wg, pool = group(EchoWorker, 2)
    try:
        data = DataProto.from_dict({"x": torch.arange(5)}, {"uid": [f"u{i}" for i in range(5)]})
        out = wg.tag(data)  # 5 rows -> padded to 6 -> 3 per rank -> gathered and unpadded
        assert out.batch["x2"].tolist() == [0, 2, 4, 6, 8]
        assert out.batch["rank"].tolist() == [0, 0, 0, 1, 1]
        assert list(out.non_tensor_batch["uid"]) == ["u0", "u1", "u2", "u3", "u4"]
        assert wg.add(1, b=2) == [(0, 3), (1, 3)]
        assert wg.own(["a", "b"]) == [(0, "a"), (1, "b")]
        assert wg.who() == 0
        future = wg.later()
        assert future.get() == [2, 2]
        started = wg.start("add", 1, b=2)  # a blocking method, started without waiting, dispatched as registered
        assert wg.own(["a", "b"]) == [(0, "a"), (1, "b")] and started.get() == [(0, 3), (1, 3)]
        with pytest.raises(ValueError, match="ALL_TO_ALL argument 0 must be a list of 2 items"):
            wg.own(["only one"])
        routed = wg.routed(DataProto.from_dict(non_tensors={"route": [4, 1, 2, 7, 6]}))  # rank = route % 2
        assert list(routed.non_tensor_batch["route"]) == [4, 2, 6, 1, 7]
        assert list(routed.non_tensor_batch["rank"]) == [0, 0, 0, 1, 1]
        assert len(wg.routed(DataProto.from_dict(non_tensors={"route": [3]}))) == 1  # rank 0 gets no rows
        assert list(wg.ranks(2).non_tensor_batch["rank"]) == [0, 0, 1, 1]
    finally:
        close_group(wg, pool)


def test_worker_exception_names_rank_and_message(ray_local):
    wg, pool = group(EchoWorker, 2)
    try:
        with pytest.raises(
            WorkerError, match=r"EchoWorker.fail_on failed on rank 1 of 2:[\s\S]*deliberate failure on rank 1"
        ):
            wg.fail_on(1)
        started = wg.start("fail_on", 0)  # started, not waited for: the error comes with get()
        with pytest.raises(WorkerError, match=r"EchoWorker.fail_on failed on rank 0 of 2"):
            started.get()
        assert wg.fail_on(5) == ["ok", "ok"]  # the group survives
    finally:
        close_group(wg, pool)


def test_a_worker_killed_by_rays_memory_monitor_is_named(ray_local, monkeypatch):
    """Fault injection (Ray's OOM kill cannot be provoked on demand; the real kill path is the worker drill in
    tests/drills): an OutOfMemoryError from ray.get becomes a WorkerError naming the class, rank and call."""
    import ray
    from ray.exceptions import OutOfMemoryError

    wg, pool = group(EchoWorker, 2)
    try:

        def oom(ref, *args, **kwargs):
            raise OutOfMemoryError("1 worker(s) were killed due to the node running low on memory.\nmore detail")

        monkeypatch.setattr(ray, "get", oom)
        with pytest.raises(WorkerError) as caught:
            wg.who()
        assert str(caught.value) == (
            "EchoWorker rank 0 of 2 died during who: OutOfMemoryError: "
            "1 worker(s) were killed due to the node running low on memory."
        )
    finally:
        monkeypatch.undo()
        close_group(wg, pool)


def test_pool_larger_than_cluster_fails_at_once(ray_local):
    with pytest.raises(
        ResourceError,
        match=r"needs 128 CPU \(2 workers x 64 CPU each\) but Ray has [\d.]+ CPU available \(4 in the cluster\)",
    ):
        RayResourcePool([2], cpus_per_worker=64).get_placement_groups()
    with pytest.raises(ResourceError, match=r"needs 1 GPU .* but Ray has 0 GPU available"):
        RayResourcePool([1], use_gpu=True).get_placement_groups()


# ----------------------------------------------------------------------------- actor / rollout


def actor_config(path, **actor):
    return {
        "model": {"path": path},
        "actor": {
            "ppo_mini_batch_size": 4,
            "ppo_micro_batch_size_per_gpu": 2,
            "use_dynamic_bsz": False,  # row micro-batches: both layouts group the same rows
            "mixed_precision": "float32",
            "shuffle": False,
            "optim": {"lr": 1e-2, "weight_decay": 0.0},
            **actor,
        },
        "rollout": {"name": "vllm", "dtype": "float32", "kv_cache_gb": 1, "max_model_len": 512},
        "num_threads": 1,
    }


def training_batch(n=4):
    prompts = [[1, 2, 3, 4], [5, 6, 7], [8, 9], [10, 11, 12]] * (n // 4)
    responses = [[30, 31, 32], [40, 41], [50, 51, 52, 53], [60]] * (n // 4)
    d = packed_proto(prompts, responses, pad_id=2)
    d.batch["advantages"] = torch.ones_like(d.batch["response_mask"], dtype=torch.float32)
    return d


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_fsdp_two_ranks_match_one_process(ray_local, tiny_model_path, tmp_path, lora_rank):
    """Also with LoRA: FSDP2 shards the frozen base and the adapters; the reference (adapters off) equals the policy
    before the first update on both layouts, and the checkpoint's merged Hugging Face export agrees."""
    from safetensors.torch import load_file

    results = {}
    for n in (1, 2):
        # one mini-batch of 8 rows: 1 rank takes all 8, 2 ranks take 4 each (different micro-batches, same step)
        # the flat path on both layouts: one rank would pack the batch's copied rows and two ranks would not, and
        # AdamW's first step (lr 1e-2) turns round-off in near-zero gradients into differences above this test's
        # tolerance; packing is compared with the flat path in test_tree_packing.py
        config = actor_config(tiny_model_path, ppo_mini_batch_size=8, tree_packing="off")
        config["model"].update(lora_rank=lora_rank, lora_alpha=8.0)
        wg, pool = group(ActorRolloutRefWorker, n, config=config, role="actor_ref" if lora_rank else "actor")
        try:
            wg.init_model()
            data = training_batch(8)
            data.meta_info.update(PLAIN)
            lp = wg.compute_log_prob(data)
            if lora_rank:
                assert torch.equal(wg.compute_ref_log_prob(data).batch["ref_log_prob"], lp.batch["old_log_probs"])
            data.union(lp)
            metrics = wg.update_actor(data).meta_info["metrics"]
            wg.save_checkpoint(str(tmp_path / f"ws{n}"))
            results[n] = (
                lp.batch["old_log_probs"],
                metrics,
                torch.load(tmp_path / f"ws{n}" / "actor.pt", weights_only=False)["model"],
                load_file(str(tmp_path / f"ws{n}" / "huggingface" / "model.safetensors")),
            )
        finally:
            close_group(wg, pool)
    lp1, m1, w1, hf1 = results[1]
    lp2, m2, w2, hf2 = results[2]
    torch.testing.assert_close(lp2, lp1, atol=1e-5, rtol=1e-5)
    for key in ("actor/pg_loss", "actor/grad_norm", "actor/entropy"):
        assert m2[key] == pytest.approx(m1[key], rel=1e-4), key
    assert w1.keys() == w2.keys() and len(w1) == (
        28 if lora_rank else 21
    )  # LoRA: the adapters only (2 layers x 7 projections x A, B)
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=1e-4)
    assert hf1.keys() == hf2.keys() and not any("lora" in name for name in hf1)
    for name in hf1:
        torch.testing.assert_close(hf2[name], hf1[name], atol=1e-5, rtol=1e-4)


@pytest.fixture(scope="module")
def hybrid(ray_local, tiny_model_path):
    wg, pool = group(ActorRolloutRefWorker, 1, cpus=1, config=actor_config(tiny_model_path, ppo_epochs=4))
    wg.init_model()
    yield wg
    close_group(wg, pool)


def greedy(wg, prompts, max_tokens=6):
    out = wg.generate_sequences(
        DataProto.from_dict(
            non_tensors={"prompt_ids": prompts}, meta_info={**PLAIN, "do_sample": False, "max_tokens": max_tokens}
        )
    )
    return [list(r) for r in out.non_tensor_batch["response_ids"]], [
        list(r) for r in out.non_tensor_batch["response_log_probs"]
    ]


PROMPTS = [[1, 2, 3, 4], [5, 6, 7], [100, 200, 300, 400, 500]]


def test_vllm_and_hf_agree_on_greedy_output(hybrid, tiny_model_path):
    from verl.workers.rollout.base import SamplingParams
    from verl.workers.rollout.hf_rollout import HFRollout

    vllm_ids, vllm_lps = greedy(hybrid, PROMPTS)
    hf = HFRollout(tiny_model_path, dtype="float32").generate(
        PROMPTS, [SamplingParams(temperature=0, top_p=1.0, top_k=-1, max_tokens=6)] * 3
    )
    assert vllm_ids == [o.token_ids for o in hf]
    for mine, ref in zip(vllm_lps, hf):
        np.testing.assert_allclose(mine, ref.log_probs, atol=1e-3)


def test_sampling_is_reproducible_per_seed(hybrid):
    def sample(seeds):
        d = DataProto.from_dict(
            non_tensors={"prompt_ids": [PROMPTS[0]] * len(seeds), "seed": seeds},
            meta_info={**PLAIN, "max_tokens": 8},
        )
        return [list(r) for r in hybrid.generate_sequences(d).non_tensor_batch["response_ids"]]

    first = sample([1, 2, 1])
    assert first[0] == first[2] and first[0] != first[1]
    assert sample([2]) == [first[1]]


def test_update_moves_policy_and_engine_follows(hybrid):
    before_ids, before_lps = greedy(hybrid, PROMPTS)
    target = training_batch(4)  # positive advantage on fixed continuations
    target.meta_info.update(PLAIN)
    old = hybrid.compute_log_prob(target)
    target.union(old)
    metrics = hybrid.update_actor(target).meta_info["metrics"]
    assert metrics["timing_s/weight_sync"] > 0
    new = hybrid.compute_log_prob(target).batch["old_log_probs"]
    mask = target.batch["response_mask"].bool()
    assert (new - old.batch["old_log_probs"])[mask].min() > 0.1  # every rewarded token became more likely

    after_ids, after_lps = greedy(hybrid, PROMPTS)
    assert after_lps != before_lps  # the engine serves the new weights
    # the engine's log-probs of its own greedy output match the trainer's on the same tokens
    check = packed_proto(PROMPTS, after_ids, pad_id=2)
    check.meta_info.update(PLAIN)
    trainer = hybrid.compute_log_prob(check).batch["old_log_probs"]
    for row, lps in enumerate(after_lps):
        np.testing.assert_allclose(trainer[row, : len(lps)].numpy(), lps, atol=1e-3)


def test_a_call_without_its_sampling_names_the_missing_key(hybrid):
    """The worker has no sampling of its own: generation and every log-prob call read it from ``meta_info``."""
    prompts = DataProto.from_dict(non_tensors={"prompt_ids": PROMPTS}, meta_info={"top_p": 1.0, "top_k": -1})
    with pytest.raises(
        WorkerError, match=r"generate_sequences failed on rank 0 of 1:[\s\S]*meta_info has no 'temperature'"
    ):
        hybrid.generate_sequences(prompts)
    rows = training_batch(4)
    rows.meta_info.update(temperature=1.0, top_p=1.0)
    with pytest.raises(WorkerError, match=r"compute_log_prob failed on rank 0 of 1:[\s\S]*meta_info has no 'top_k'"):
        hybrid.compute_log_prob(rows)


def assert_same_checkpoint(first: Path, second: Path) -> None:
    """Two ``<name>.pt`` files hold bit-identical weights, optimiser state and scheduler state."""
    a, b = torch.load(first, weights_only=False), torch.load(second, weights_only=False)
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    assert (a["optimizer"] is None) == (b["optimizer"] is None)  # None: saved before the first update
    for pid, state in (a["optimizer"] or {"state": {}})["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(b["optimizer"]["state"][pid][key])), (pid, key)
    assert a["scheduler"] == b["scheduler"]


def test_checkpoint_roundtrip_is_bit_identical(hybrid, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    hybrid.save_checkpoint(str(first))
    data = training_batch(4)
    data.meta_info.update(PLAIN)
    data.union(hybrid.compute_log_prob(data))
    hybrid.update_actor(data)  # move away from the checkpoint
    hybrid.load_checkpoint(str(first))
    hybrid.save_checkpoint(str(second))
    assert_same_checkpoint(first / "actor.pt", second / "actor.pt")
    assert (first / "huggingface" / "model.safetensors").is_file() and (
        first / "huggingface" / "tokenizer.json"
    ).is_file()


# ----------------------------------------------------------------------------- critic


def test_critic_values_update_and_checkpoint_roundtrip(ray_local, tiny_model_path, tmp_path):
    cfg = {
        "model": {"path": tiny_model_path},
        "ppo_mini_batch_size": 4,
        "ppo_micro_batch_size_per_gpu": 2,
        "ppo_epochs": 8,
        "cliprange_value": 0.5,
        "mixed_precision": "float32",
        "optim": {"lr": 1e-3, "weight_decay": 0.0},
        "num_threads": 1,
    }
    wg, pool = group(CriticWorker, 1, config=cfg)
    try:
        wg.init_model()
        data = training_batch(4)
        values = wg.compute_values(data).batch["values"]
        assert torch.equal(values, torch.zeros_like(values))  # the value head starts at zero
        data.batch["values"] = values
        data.batch["returns"] = torch.ones_like(values) * data.batch["response_mask"]
        metrics = wg.update_critic(data).meta_info["metrics"]
        # epoch 1 starts at V = 0 with returns 1: 0.5 * mean((0 - 1)^2) = 0.5 on the first mini-batch
        assert metrics["critic/values/mean"] == 0.0 and metrics["critic/returns/mean"] == 1.0
        assert metrics["critic/vf_loss"] < 0.5
        new_values = wg.compute_values(data).batch["values"]
        mask = data.batch["response_mask"].bool()
        assert new_values[mask].mean() > 0.3
        # a checkpoint holds the value model and its optimiser: loading it undoes a later update exactly
        first, second = tmp_path / "a", tmp_path / "b"
        wg.save_checkpoint(str(first))
        wg.update_critic(data)
        assert not torch.equal(wg.compute_values(data).batch["values"], new_values)
        wg.load_checkpoint(str(first))
        assert torch.equal(wg.compute_values(data).batch["values"], new_values)
        wg.save_checkpoint(str(second))
        assert torch.load(first / "critic.pt", weights_only=False)["optimizer"]["state"]  # the update's AdamW moments
        assert_same_checkpoint(first / "critic.pt", second / "critic.pt")
    finally:
        close_group(wg, pool)


# ----------------------------------------------------------------------------- dynamic batching over ranks


def test_dynamic_batching_with_uneven_micro_batch_counts_does_not_hang(ray_local, tiny_model_path):
    """Rank 0 gets 4 long rows (one micro-batch each under the token budget), rank 1 gets 4 short rows (one
    micro-batch in all): every call still finishes on 2 ranks, and matches a 1-rank run."""
    import ray
    from ray.exceptions import GetTimeoutError

    from verl.utils.torch_functional import plan_micro_batches

    budget = 24  # tokens per micro-batch
    prompts = [[1, 2, 3, 4]] * 4 + [[5, 6]] * 4
    responses = [list(range(30 + i, 50 + i)) for i in range(4)] + [[60 + i, 61 + i] for i in range(4)]
    data = packed_proto(prompts, responses, pad_id=2)  # rows 0-3: 24 tokens, rows 4-7: 4 tokens
    data.batch["advantages"] = (
        torch.ones_like(data.batch["response_mask"], dtype=torch.float32) * data.batch["response_mask"]
    )
    data.meta_info.update(PLAIN)
    # DP_COMPUTE_PROTO gives rows 0-3 to rank 0 and rows 4-7 to rank 1: 2 x 24 > budget, but 4 x 4 <= budget
    mask = data.batch["attention_mask"]
    assert len(plan_micro_batches(mask[:4], 4, budget)) == 4 and len(plan_micro_batches(mask[4:], 4, budget)) == 1

    batching = {"use_dynamic_bsz": True, "ppo_mini_batch_size": 8, "ppo_micro_batch_size_per_gpu": 4}
    actor_cfg = actor_config(
        tiny_model_path,
        **batching,
        ppo_max_token_len_per_gpu=budget,
        log_prob_micro_batch_size_per_gpu=4,
        log_prob_max_token_len_per_gpu=budget,
    )
    actor_cfg["ref"] = {"log_prob_micro_batch_size_per_gpu": 4, "log_prob_max_token_len_per_gpu": budget}
    critic_cfg = {
        "model": {"path": tiny_model_path},
        **batching,
        "ppo_max_token_len_per_gpu": budget,
        "shuffle": False,
        "mixed_precision": "float32",
        "optim": {"lr": 1e-3, "weight_decay": 0.0},
        "num_threads": 1,
    }

    def call(wg, method, batch, timeout=180.0):
        future = wg.execute(method, Dispatch.DP_COMPUTE_PROTO, batch)
        try:
            ray.get(future.refs, timeout=timeout)
        except GetTimeoutError:
            for actor in wg._actors:  # hung in a collective: kill now rather than wait for the shutdown hook
                ray.kill(actor)
            pytest.fail(f"{wg.cls_name}.{method} did not finish within {timeout:.0f}s on {wg.world_size} ranks")
        return future.get()

    results = {}
    for n in (2, 1):
        actor_wg, actor_pool = group(ActorRolloutRefWorker, n, config=actor_cfg, role="actor_ref")
        critic_wg, critic_pool = group(CriticWorker, n, config=critic_cfg)
        try:
            actor_wg.init_model()
            critic_wg.init_model()
            batch = data.select()  # a fresh copy per run
            old = call(actor_wg, "compute_log_prob", batch)
            ref = call(actor_wg, "compute_ref_log_prob", batch)
            batch.union(old)
            actor_metrics = call(actor_wg, "update_actor", batch).meta_info["metrics"]
            batch.meta_info["keep_graph"] = True  # four forwards kept per rank (fillers on rank 1), then backwards
            values = call(critic_wg, "compute_values", batch).batch["values"]
            batch.batch["values"] = values
            batch.batch["returns"] = data.batch["response_mask"].float()
            critic_metrics = call(critic_wg, "update_critic", batch).meta_info["metrics"]
            results[n] = (old.batch["old_log_probs"], ref.batch["ref_log_prob"], values, actor_metrics, critic_metrics)
        finally:
            close_group(actor_wg, actor_pool)
            close_group(critic_wg, critic_pool)

    old2, ref2, values2, am2, cm2 = results[2]
    old1, ref1, values1, am1, cm1 = results[1]
    response = data.batch["response_mask"].bool()
    assert old2[response].abs().min() > 0 and (old2[~response] == 0).all()  # every real token scored, padding 0
    torch.testing.assert_close(old2, old1, atol=1e-5, rtol=0)
    torch.testing.assert_close(ref2, ref1, atol=1e-5, rtol=0)
    torch.testing.assert_close(ref2, old2, atol=1e-6, rtol=0)  # identical weights, one log-prob path
    assert torch.equal(values2, values1) and torch.equal(
        values2, torch.zeros_like(values2)
    )  # the value head starts at 0
    # the padding micro-batches (zero loss mask) add nothing: the update equals the 1-rank one
    for key in ("actor/pg_loss", "actor/grad_norm", "actor/entropy"):
        assert am2[key] == pytest.approx(am1[key], rel=1e-4), key
    for key in ("critic/vf_loss", "critic/grad_norm"):
        assert cm2[key] == pytest.approx(cm1[key], rel=1e-4), key
    assert cm2["critic/vf_loss"] == pytest.approx(0.5)  # V = 0, returns 1: 0.5 * mean((0 - 1)^2)
    assert cm2["critic/values_forward_reused"] == cm1["critic/values_forward_reused"] == 1.0
