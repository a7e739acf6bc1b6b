"""Resident memory of processes, now (not the lifetime peak), and handing freed heap back to the OS.

A training step allocates and frees gigabytes of activations and logits. glibc
keeps freed chunks in its arenas, so a worker's resident set ratchets up from
step to step (measured: an actor worker at 7.6 GiB after one update holds
5.0 GiB of live data). `release_free_heap` returns those pages after every
worker call, so current RSS tracks what the worker really holds. The next call
faults them in again (about 2.4 million page faults for one packed fp32 SFT
step of the default warm start, a fifth of its time), so a trainer alone on
the box (SFT, the reward model) keeps its freed heap (`TrainableModule`'s
``release_heap``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import psutil

GB = 1024**3


def current_rss_gb(pid: int | None = None) -> float:
    """Current resident set size of ``pid`` (default: this process) in GiB; 0.0 if the process is gone."""
    try:
        return psutil.Process(pid or os.getpid()).memory_info().rss / GB
    except psutil.Error:
        return 0.0


def _load_malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


_MALLOC_TRIM = _load_malloc_trim()


def release_free_heap() -> None:
    """``malloc_trim(0)``: give the heap's free pages back to the OS (a no-op where libc lacks it)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
