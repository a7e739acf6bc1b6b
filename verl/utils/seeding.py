"""Deterministic per-sample seeds, shared by every rollout (multi-turn agent and single-turn generation)."""

from __future__ import annotations

import hashlib

SEED_MOD = 2**31


def trajectory_seed(base_seed: int, global_step: int, row: int, copy: int) -> int:
    """A deterministic seed in ``[0, 2**31)``: blake2b of ``"base:step:row:copy"``."""
    digest = hashlib.blake2b(f"{base_seed}:{global_step}:{row}:{copy}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % SEED_MOD
