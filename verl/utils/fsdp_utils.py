"""FSDP2 wrapping, full state dicts, optimiser/scheduler construction and RNG state.

Sharding uses ``torch.distributed.fsdp.fully_shard`` on every decoder layer and
then on the root module, over a 1-D device mesh of all ranks (gloo on CPU,
nccl on GPU). With one rank there is nothing to shard and the module stays a
plain one (FSDP2's per-layer hooks and DTensor parameters cost about 15% of
an update there); state dicts are full either way, so checkpoints move between
world sizes. Parameters stay fp32 (the master weights); compute runs under
autocast in the configured dtype.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from verl.utils.lora import lora_scales, merge_lora

if TYPE_CHECKING:  # a type hint only: the optimiser's settings are the workers' config
    from verl.workers.config import OptimConfig


def shard_module(module: torch.nn.Module, device: str) -> torch.nn.Module:
    """`apply_fsdp2` over several ranks; one rank trains ``module`` as it is (FSDP2 would only add its hooks)."""
    return module if dist.get_world_size() == 1 else apply_fsdp2(module, device)


def apply_fsdp2(module: torch.nn.Module, device: str) -> torch.nn.Module:
    """FSDP2 on each ``*DecoderLayer`` and then the root, over all ranks of the default process group."""
    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    for sub in module.modules():
        if type(sub).__name__.endswith("DecoderLayer"):
            fully_shard(sub, mesh=mesh)
    fully_shard(module, mesh=mesh)
    return module


def full_model_state_dict(module: torch.nn.Module, cpu_offload: bool) -> dict[str, torch.Tensor]:
    """Unsharded weights under their Hugging Face names, LoRA adapters folded in (``W + (alpha / r) B A``,
    `verl.utils.lora.merge_lora`): what the rollout engine and an HF export take. With ``cpu_offload`` only
    rank 0 receives them (others get an empty dict)."""
    state = get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=cpu_offload))
    return merge_lora(state, lora_scales(module))


def full_train_state(module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict | None]:
    """Unsharded state of the trained parameters and the optimiser, on rank 0 (on CPU). Frozen parameters
    (a LoRA model's base weights) are left out: they are the model folder's. The optimiser's state is None before
    its first step: asking for it then would initialise it with a zero-gradient step (AdamW's step count 1), and
    the next real update would be bias-corrected as the second."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=True)
    if optimizer.state:
        model_sd, optim_sd = get_state_dict(module, optimizer, options=options)
    else:
        model_sd, optim_sd = get_model_state_dict(module, options=options), None
    frozen = {
        name for name, p in module.named_parameters(remove_duplicate=False) if not p.requires_grad
    }  # tied aliases too
    return {k: v for k, v in model_sd.items() if k not in frozen}, optim_sd


def load_full_train_state(
    module: torch.nn.Module, optimizer: torch.optim.Optimizer | None, model_sd: dict, optim_sd: dict | None
) -> None:
    """Load unsharded state that only rank 0 read from disk; it is broadcast to every rank's shards. Frozen
    parameters absent from ``model_sd`` (see `full_train_state`) keep their values. ``optim_sd`` None (saved before
    the first step; every rank must pass None then) leaves ``optimizer`` as a new one: its state is cleared."""
    frozen = any(not p.requires_grad for p in module.parameters())
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=not frozen)
    if optimizer is None or optim_sd is None:
        set_state_dict(module, optimizers=(), model_state_dict=model_sd, optim_state_dict={}, options=options)
        if optimizer is not None:
            optimizer.state.clear()
    else:
        set_state_dict(module, optimizer, model_state_dict=model_sd, optim_state_dict=optim_sd, options=options)


def build_optimizer(module: torch.nn.Module, cfg: OptimConfig) -> torch.optim.AdamW:
    """AdamW over the trainable parameters."""
    params = [p for p in module.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: OptimConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over ``lr_warmup_steps``, then constant, or cosine down to ``min_lr_ratio * lr``."""
    warmup, total = cfg.lr_warmup_steps, max(cfg.total_training_steps, 1)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if cfg.lr_scheduler == "constant":
            return 1.0
        progress = min((step - warmup) / max(total - warmup, 1), 1.0)
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def prepare_for_training(
    module: torch.nn.Module, device: str, optim: OptimConfig, recompute: bool, recomputed: torch.nn.Module | None = None
) -> tuple[torch.nn.Module, torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """``(sharded module, optimiser, scheduler)``: with ``recompute``, ``recomputed`` (a Hugging Face model; by
    default ``module`` itself) recomputes each layer's activations in backward; then the module is moved to
    ``device`` and sharded (`shard_module`), and its optimiser and schedule built from ``optim``."""
    if recompute:
        (recomputed or module).gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    module = shard_module(module.to(device), device)
    optimizer = build_optimizer(module, optim)
    return module, optimizer, build_scheduler(optimizer, optim)


def rng_state() -> dict:
    """Python, numpy and torch RNG states of this process."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def export_hf(weights: dict[str, torch.Tensor], source_path: str, folder) -> None:
    """Write ``weights`` as a Hugging Face folder (safetensors, config and tokenizer copied from ``source_path``)."""
    from pathlib import Path

    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = AutoConfig.from_pretrained(source_path)
    if getattr(config, "tie_word_embeddings", False):
        weights = {k: v for k, v in weights.items() if k != "lm_head.weight"}
    save_file(
        {k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"}
    )
    config.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(source_path).save_pretrained(str(folder))
