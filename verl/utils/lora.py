"""LoRA in plain PyTorch (torchtune style): low-rank adapters beside frozen linear layers.

A wrapped layer (`LoRALinear`) computes::

    y = x W^T + b + s (x A^T) B^T,        s = alpha / r

with the base weight ``W`` (out x in) and bias ``b`` frozen under their Hugging Face names, and only
``A`` (r x in, Kaiming-uniform) and ``B`` (out x r, zeros) trained. ``B = 0`` at the start, so the
wrapped model is exactly the base model until the first update; with the adapters off
(`lora_disabled`) it is exactly the base model at any time, which makes it the reference policy
without a second copy of the weights. Merging folds an adapter into its weight,
``W' = W + s B A`` (`merge_lora`, `merged_state_dict`): a plain Hugging Face state dict that vLLM,
``transformers`` and ``openmanus_rl.eval`` load unchanged.

    python -m verl.utils.lora export CHECKPOINT_DIR OUT_DIR [--base MODEL_DIR]

writes the policy of a trainer checkpoint (``global_step_K`` or its ``actor/``) as a merged Hugging
Face folder (the trainer's own ``actor/huggingface`` export holds the same weights).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from verl.utils.typed_config import ConfigError

ADAPTER_KEYS = ("lora_A", "lora_B")


class LoRALinear(nn.Linear):
    """``y = x W^T + b + (alpha / r) (x A^T) B^T``; ``weight`` and ``bias`` keep their names and stay frozen."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int,
        alpha: float,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.rank, self.alpha, self.scale = rank, alpha, alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, in_features, device=device, dtype=dtype))
        self.lora_B = nn.Parameter(torch.empty(out_features, rank, device=device, dtype=dtype))
        self.adapters_enabled = True
        self.reset_lora_parameters(generator)

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, rank: int, alpha: float, generator: torch.Generator | None = None
    ) -> LoRALinear:
        """Wrap ``linear``: its ``weight``/``bias`` Parameters are reused (no copy),
        frozen; new A, B on their device."""
        w = linear.weight
        layer = cls(
            linear.in_features,
            linear.out_features,
            rank,
            alpha,
            bias=linear.bias is not None,
            device="meta",
            dtype=w.dtype,
        )
        layer.weight, layer.bias = linear.weight, linear.bias
        layer.lora_A = nn.Parameter(torch.empty(rank, linear.in_features, device=w.device, dtype=w.dtype))
        layer.lora_B = nn.Parameter(torch.empty(linear.out_features, rank, device=w.device, dtype=w.dtype))
        layer.reset_lora_parameters(generator)
        layer.weight.requires_grad_(False)
        if layer.bias is not None:
            layer.bias.requires_grad_(False)
        return layer

    @torch.no_grad()
    def reset_lora_parameters(self, generator: torch.Generator | None = None) -> None:
        """A ~ U(-1/sqrt(in), 1/sqrt(in)) (Kaiming-uniform, a = sqrt(5), as nn.Linear's weight), B = 0:
        the adapter starts as the zero map."""
        if self.lora_A.is_meta:
            return
        a = torch.empty(
            self.lora_A.shape, dtype=self.lora_A.dtype
        )  # drawn on CPU: a CPU generator works for any device
        nn.init.kaiming_uniform_(a, a=math.sqrt(5), generator=generator)
        self.lora_A.copy_(a)
        self.lora_B.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x W^T + b`` plus, with the adapters on, ``s (x A^T) B^T`` (all through ``F.linear``,
        so autocast casts both paths alike)."""
        out = F.linear(x, self.weight, self.bias)
        if not self.adapters_enabled:
            return out
        return out + F.linear(F.linear(x, self.lora_A), self.lora_B) * self.scale

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rank={self.rank}, alpha={self.alpha}"


def _adaptable_layers(model: nn.Module) -> list[str]:
    """Full names of the linear layers that can take an adapter:
    not one whose weight is tied to another module's (a tied LM head)."""
    uses = Counter(id(p) for _, p in model.named_parameters(remove_duplicate=False))
    return [name for name, m in model.named_modules() if isinstance(m, nn.Linear) and uses[id(m.weight)] == 1]


def linear_layer_names(model: nn.Module) -> list[str]:
    """The distinct last names of ``model``'s linear layers that can take an adapter (what ``target_modules`` lists)."""
    return sorted({name.rsplit(".", 1)[-1] for name in _adaptable_layers(model)})


def target_layers(model: nn.Module, targets: list[str]) -> list[str]:
    """Full names of the linear layers whose last name is in ``targets``;
    `ConfigError` for a target that matches none."""
    available = linear_layer_names(model)
    unknown = [t for t in targets if t not in available]
    if unknown:
        raise ConfigError(
            f"target_modules {unknown} match no linear layer of the model; its linear layers: {available}"
        )
    return [name for name in _adaptable_layers(model) if name.rsplit(".", 1)[-1] in targets]


def check_target_modules(model_path: str, targets: list[str], where: str) -> None:
    """`target_layers` on the model at ``model_path`` built on the meta device (no weights read):
    a config check before any work."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_path))
    try:
        target_layers(model, targets)
    except ConfigError as exc:
        raise ConfigError(f"{where}.{exc}") from None


def apply_lora(model: nn.Module, rank: int, alpha: float, targets: list[str], seed: int = 0) -> list[str]:
    """Replace each linear layer named in ``targets`` by a `LoRALinear` (scale ``alpha / rank``) in place, freeze every
    other parameter, and return the wrapped layers' names. ``seed`` draws the A matrices (the same on every rank)."""
    names = target_layers(model, targets)
    generator = torch.Generator().manual_seed(seed)
    model.requires_grad_(False)
    for name in names:
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent)
        setattr(owner, child, LoRALinear.from_linear(getattr(owner, child), rank, alpha, generator))
    return names


def lora_layers(model: nn.Module) -> dict[str, LoRALinear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}


@contextlib.contextmanager
def lora_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Run ``model`` with every adapter off: ``y = x W^T + b``, the base model exactly (a no-op without adapters)."""
    layers = list(lora_layers(model).values())
    before = [layer.adapters_enabled for layer in layers]
    for layer in layers:
        layer.adapters_enabled = False
    try:
        yield model
    finally:
        for layer, enabled in zip(layers, before):
            layer.adapters_enabled = enabled


def merge_lora(state: dict[str, torch.Tensor], scales: dict[str, float]) -> dict[str, torch.Tensor]:
    """A LoRA model's full state dict as plain Hugging Face weights: ``W' = W + s B A`` for each adapted layer
    (``scales``: layer name -> ``alpha / r``), no ``lora_A``/``lora_B`` entries. An empty ``state`` stays empty."""
    merged = {k: v for k, v in state.items() if k.rsplit(".", 1)[-1] not in ADAPTER_KEYS}
    for name, scale in scales.items():
        if f"{name}.weight" in state:
            w = state[f"{name}.weight"]
            merged[f"{name}.weight"] = w + scale * (
                state[f"{name}.lora_B"].to(w.dtype) @ state[f"{name}.lora_A"].to(w.dtype)
            )
    return merged


def lora_scales(model: nn.Module) -> dict[str, float]:
    """Layer name -> ``alpha / r`` of every adapter in ``model``."""
    return {name: layer.scale for name, layer in lora_layers(model).items()}


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s weights under their Hugging Face names with every adapter folded in, ``W + (alpha / r) B A``
    (an unsharded module; for FSDP2, `verl.utils.fsdp_utils.full_model_state_dict`)."""
    return merge_lora(model.state_dict(), lora_scales(model))


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """Only the adapters: ``<layer>.lora_A`` (r x in) and ``<layer>.lora_B`` (out x r) of every `LoRALinear`."""
    return {k: v for k, v in model.state_dict().items() if k.rsplit(".", 1)[-1] in ADAPTER_KEYS}


def export_checkpoint(checkpoint: str | Path, out_dir: str | Path, base: str | None = None) -> Path:
    """Write the policy of a trainer checkpoint (``global_step_K`` or its ``actor/``) as a Hugging Face folder:
    the base model (``base``, else the one the checkpoint names) with the checkpoint's trained weights,
    adapters merged."""
    from transformers import AutoModelForCausalLM

    from verl.utils.fsdp_utils import export_hf

    actor = Path(checkpoint)
    if (actor / "actor" / "actor.pt").is_file():
        actor = actor / "actor"
    if not (actor / "actor.pt").is_file():
        raise FileNotFoundError(f"{checkpoint} is not a trainer checkpoint (no actor.pt in it or in its actor/)")
    worker = torch.load(actor / "actor_worker.pt", weights_only=False) if (actor / "actor_worker.pt").is_file() else {}
    base = base or worker.get("model_path")
    if not base:
        raise ValueError(f"{actor / 'actor_worker.pt'} does not name the base model: pass --base MODEL_DIR")
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    lora = worker.get("lora")
    if lora:
        apply_lora(model, lora["rank"], lora["alpha"], lora["target_modules"])
    state = torch.load(actor / "actor.pt", weights_only=False)["model"]
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    if not trained <= set(state):
        raise ValueError(
            f"{actor / 'actor.pt'} lacks {sorted(trained - set(state))[:4]}...: "
            f"it was not saved with this LoRA setting ({lora})"
        )
    model.load_state_dict(state, strict=False)
    export_hf(merged_state_dict(model), base, out_dir)
    return Path(out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl.utils.lora", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="a checkpoint's policy as a merged Hugging Face folder")
    export.add_argument("checkpoint", help="<checkpoints>/global_step_K or its actor/ folder")
    export.add_argument("out_dir")
    export.add_argument("--base", default=None, help="the base model folder (default: the one the checkpoint names)")
    args = parser.parse_args(argv)
    print(export_checkpoint(args.checkpoint, args.out_dir, args.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
