"""`StepJournals`: where a run's rollout journals live and what makes one usable by a resumed run.

Each training step's rollout journals its finished trajectories and model turns as they happen
(``<checkpoints>/journal/step_<k>.jsonl``; the format and the replay are the rollout's, e.g.
`openmanus_rl.agent.journal`). A run resumed from checkpoint ``global_step_<s>`` rolls out step
``s + 1`` again with the same tasks and seeds; the journal of that step is used when its key is the
resumed rollout's key:

    {"step": k, "policy": <the weights that sampled it>, "config": <sha256 of the sampling config>}

``policy`` is the checkpoint folder the engine's weights were loaded from or saved as, or, for weights
that only ever lived in this process (updated since the last checkpoint), a name no other process
can repeat. So a journal is replayed only by a rollout that samples from exactly the weights it was
written with; anything else is set aside by the journal itself (one printed line). A checkpoint at
step ``s`` makes the journals of steps ``<= s`` useless (their batches are trained into it): they are
deleted, with the stale ones set aside.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

JOURNAL_DIR = "journal"


OPERATIONAL_KEYS = frozenset(
    {
        # where and how env calls go: not what an episode is
        "env_server_base", "env_ports", "env_servers", "concurrency", "request_timeout_s", "episode_timeout_s",
        "env_retries", "env_retry_backoff_s", "env_cooldown_s", "manage_servers", "server_nodes", "server_max_restarts",
        "server_hang_s", "write_viewer", "progress_every_s",
        # how trajectories are scheduled on the engine: the same samples either way (seeds per trajectory and turn)
        "rollout_mode", "max_in_flight", "kv_cache_gb", "gpu_memory_utilization", "cpu_threads_bind", "in_process",
    }
)  # fmt: skip


def sampling_fingerprint(*sections: Any) -> str:
    """SHA-256 of the config sections that decide what a rollout samples (dataclasses or plain mappings), without
    their `OPERATIONAL_KEYS`: a run resumed on other ports or with another schedule still replays its journal."""
    plain = []
    for section in sections:
        fields = dataclasses.asdict(section) if dataclasses.is_dataclass(section) else dict(section)
        plain.append({k: v for k, v in fields.items() if k not in OPERATIONAL_KEYS})
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()


class StepJournals:
    """The journals under ``checkpoints/journal`` of one run, keyed as the module docstring says."""

    def __init__(self, ckpt_dir: str | Path, fingerprint: str) -> None:
        self.root = Path(ckpt_dir) / JOURNAL_DIR
        self.fingerprint = fingerprint
        self._process = uuid.uuid4().hex[:12]
        self._sources: dict[int, str] = {}  # policy version -> checkpoint folder holding exactly those weights

    def path(self, step: int) -> Path:
        return self.root / f"step_{step}.jsonl"

    def key(self, step: int, policy_version: int) -> dict[str, Any]:
        """The key of step ``step``'s rollout, sampled by the weights of ``policy_version``."""
        policy = self._sources.get(policy_version, f"unsaved weights v{policy_version} of process {self._process}")
        return {"step": step, "policy": policy, "config": self.fingerprint}

    def loaded(self, policy_version: int, checkpoint: Path) -> None:
        """The engine's weights of ``policy_version`` were loaded from ``checkpoint``."""
        self._sources[policy_version] = str(Path(checkpoint).resolve())

    def saved(self, policy_version: int, checkpoint: Path, step: int) -> None:
        """``checkpoint`` holds the weights of ``policy_version`` and every step up to ``step``: their journals go."""
        self._sources[policy_version] = str(Path(checkpoint).resolve())
        for path in self.root.glob("step_*.jsonl*"):
            number = path.name.split(".", 1)[0].removeprefix("step_")
            if number.isdigit() and int(number) <= step:
                path.unlink(missing_ok=True)
