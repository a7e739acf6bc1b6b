"""Freed heap goes back to the OS: what keeps a worker's current RSS from ratcheting up step after step."""

import sys

import pytest

from verl.utils.memory import current_rss_gb, release_free_heap


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_release_free_heap_returns_freed_chunks_below_a_live_one():
    blocks = [bytearray(64 * 1024) for _ in range(3200)]  # 200 MiB of heap chunks (below the mmap threshold)
    sentinel = bytearray(64 * 1024)  # allocated last: free() alone cannot shrink the heap past it
    held = current_rss_gb()
    del blocks
    freed_only = current_rss_gb()
    release_free_heap()
    trimmed = current_rss_gb()
    assert held - freed_only < 0.05  # glibc keeps the freed chunks: RSS barely moves on free()
    assert freed_only - trimmed > 0.15  # malloc_trim hands (most of) the 200 MiB back
    del sentinel


@pytest.mark.parametrize("release_heap, trims", [(True, 2), (False, 0)])
def test_a_worker_trims_after_each_call_and_a_trainer_alone_on_the_box_does_not(monkeypatch, release_heap, trims):
    """A worker sharing the box hands its freed heap back after an update and after a no-grad pass; SFT and
    reward-model training (`FitTrainer.trainable`) keep it, since faulting it in again every step costs time."""
    import torch

    from verl.protocol import DataProto
    from verl.workers import trainable
    from verl.workers.config import UpdateBatchingConfig

    calls = []
    monkeypatch.setattr(trainable, "release_free_heap", lambda: calls.append(1))
    linear = torch.nn.Linear(3, 1)
    model = trainable.TrainableModule(
        linear, torch.optim.SGD(linear.parameters(), lr=0.1), None, "cpu", "float32", release_heap=release_heap
    )
    ones = torch.ones(2, 3, dtype=torch.long)
    data = DataProto.from_dict(
        {"input_ids": ones, "attention_mask": ones, "response_mask": ones, "x": torch.ones(2, 3)}
    )
    cfg = UpdateBatchingConfig(2, 2, False, 8, 1, False, "token-mean", "off")
    model.run_update(data, lambda mb: (linear(mb.batch["x"]).sum(), {}), cfg, seed=0, metric_prefix="t")
    model.map_micro_batches(data, lambda mb: {"y": linear(mb.batch["x"])}, 2, None)
    assert len(calls) == trims
