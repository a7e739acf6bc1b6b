"""Resident memory of processes, now (not the lifetime peak): for step metrics and the soak script."""

from __future__ import annotations

import os

import psutil

GB = 1024**3


def current_rss_gb(pid: int | None = None) -> float:
    """Current resident set size of ``pid`` (default: this process) in GiB; 0.0 if the process is gone."""
    try:
        return psutil.Process(pid or os.getpid()).memory_info().rss / GB
    except psutil.Error:
        return 0.0
