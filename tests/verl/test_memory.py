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
