"""`Worker`: the base of every class that runs as one rank of a worker group.

The worker group starts each rank with ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` in its environment; the
worker reads them and, on request, joins ``torch.distributed`` with gloo on CPU
or nccl on CUDA (overridable).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist


def default_backend(device: str) -> str:
    """gloo for CPU, nccl for CUDA."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def free_port() -> int:
    """A TCP port that is free on this host right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Worker:
    """One rank: knows its place in the group and can join the process group."""

    def __init__(self) -> None:
        self.rank = int(os.environ.get("RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.master_addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
        self.master_port = int(os.environ.get("MASTER_PORT", 0) or 0)
        self._owns_process_group = False

    def init_distributed(self, device: str = "cpu", backend: str | None = None, timeout_s: int = 600) -> None:
        """Join the default process group once (a no-op when already joined, e.g. by an in-process vLLM engine)."""
        if dist.is_initialized():
            return
        device_id = None
        if torch.device(device).type == "cuda":
            # Ray gives each actor only its own GPU(s) through CUDA_VISIBLE_DEVICES
            device_id = torch.device("cuda", self.local_rank % max(torch.cuda.device_count(), 1))
            torch.cuda.set_device(device_id)
        if not self.master_port:
            if self.world_size > 1:
                raise RuntimeError("MASTER_PORT is not set for a multi-rank worker")
            self.master_port = free_port()
        dist.init_process_group(
            backend=backend or default_backend(device),
            init_method=f"tcp://{self.master_addr}:{self.master_port}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(seconds=timeout_s),
            device_id=device_id,  # nccl binds this rank's GPU now instead of guessing it at the first collective
        )
        self._owns_process_group = True

    def leave_distributed(self) -> None:
        """Destroy the default process group if `init_distributed` created it; a group that was already there
        belongs to whoever made it (another worker or an in-process vLLM engine in this process) and stays."""
        if self._owns_process_group and dist.is_initialized():
            dist.destroy_process_group()
        self._owns_process_group = False
