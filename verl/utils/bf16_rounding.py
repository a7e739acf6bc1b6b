"""fp32 weights to bf16 by stochastic rounding, for the trainer's bf16 autocast and for a bf16 rollout engine.

bf16 keeps fp32's top 16 bits. Rounding to nearest keeps a weight where it was until it has moved half a bf16
step (1/512 to 1/256 of its size): SmolLM2's published weights lie exactly on the bf16 grid, and SFT moved 52%
of all weights by less than that, so a bf16 view rounded to nearest undoes much of a fine-tune. On box A
the default warm start scored 0.235 on 200 WebShop test goals with its weights rounded to nearest (computed in
fp32), 0.400 and 0.395 rounded stochastically (computed in bf16), 0.390 in fp32; bf16 SFT under autocast
lagged fp32 by a step (dev loss 0.268 against 0.186 after an epoch) and scored 0.180 (0.230 evaluated in bf16).

Stochastic rounding rounds a weight up with probability (dropped bits) / 2^16, so its expected value is the
fp32 weight. The random draw here is a dither fixed by the tensor's name (`dither`): the same fp32 tensor
always gives the same bf16 one, so the actor, the reference and the engine agree bit for bit on identical
weights (the KL of identical weights stays 0), and across a tensor's elements a change of any size shows in
proportion. The trainer's ``nn.Linear`` layers use it under bf16 autocast (`round_linears_stochastically`),
computed once per weight version; the gradient passes straight through to the fp32 weight.
"""

from __future__ import annotations

import types
import zlib

import torch
from torch import nn


def bf16_round_bits(x: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """fp32 ``x`` to bf16, each magnitude rounded up when its low 16 bits plus ``noise`` (int32 in
    ``[0, 2**16)``) carry into bit 16, else down.

    With ``noise`` uniform over ``[0, 2**16)``, a value whose dropped bits are ``r`` rounds up with
    probability ``r / 2**16``: over all ``2**16`` noise values the mean is ``x`` exactly. Values already on
    the bf16 grid (``r = 0``) never move.
    """
    bits = x.detach().to(torch.float32).contiguous().view(torch.int32)
    return ((bits + noise) & -(1 << 16)).view(torch.float32).to(torch.bfloat16)


def dither(name: str, shape: torch.Size, device: torch.device | str = "cpu") -> torch.Tensor:
    """Uniform int32 noise in ``[0, 2**16)`` of ``shape``, fixed by ``name`` (its CRC-32 seeds the draw)."""
    generator = torch.Generator(device=device).manual_seed(zlib.crc32(name.encode()))
    return torch.randint(0, 1 << 16, shape, generator=generator, dtype=torch.int32, device=device)


def to_bf16_stochastic(x: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` rounded to bf16 stochastically, with the dither of ``name`` (see the module docstring)."""
    return bf16_round_bits(x, dither(name, x.shape, x.device))


def engine_weight(t: torch.Tensor, name: str, dtype: str, rounding: str) -> torch.Tensor:
    """``t`` for a rollout engine computing in ``dtype``, on the CPU: fp32 into bf16 rounded stochastically with
    ``name``'s dither when ``rounding`` is ``stochastic`` (the trainer's own copy), else cast (to nearest)."""
    t = t.detach()
    if t.dtype == torch.float32 and dtype == "bfloat16" and rounding == "stochastic":
        return to_bf16_stochastic(t.cpu(), name)
    return t.to(getattr(torch, dtype)).cpu().contiguous()


class _StraightThrough(torch.autograd.Function):
    """Forward: the given bf16 view of ``weight``; backward: the gradient, in fp32, to ``weight``."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
        return view.view_as(view)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad.to(torch.float32), None


def _bf16_autocast(device_type: str) -> bool:
    return torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type) == torch.bfloat16


def _linear_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    weight = self.weight
    if weight.dtype != torch.float32 or not _bf16_autocast(weight.device.type):
        return nn.functional.linear(x, weight, self.bias)
    key = (weight.data_ptr(), weight._version)
    if self._bf16_view_key != key:  # a new weight version (an optimiser step, a load): round it again
        self._bf16_view = to_bf16_stochastic(weight, self._bf16_name)
        self._bf16_view_key = key
    return nn.functional.linear(x, _StraightThrough.apply(weight, self._bf16_view), self.bias)


def round_linears_stochastically(module: nn.Module) -> None:
    """Under bf16 autocast, each plain ``nn.Linear`` of ``module`` computes with its fp32 weight rounded
    stochastically (a bf16 copy kept until the weight changes) instead of autocast's rounding to nearest.
    A weight tied to another (the LM head) takes its first name, as the engine's checkpoint does. Outside
    bf16 autocast nothing changes. Calling it again is a no-op."""
    names = {id(p): n for n, p in module.named_parameters(remove_duplicate=True)}
    for sub in module.modules():
        if type(sub) is nn.Linear and not hasattr(sub, "_bf16_name"):
            sub._bf16_name = names.get(id(sub.weight), "weight")
            sub._bf16_view, sub._bf16_view_key = None, None
            sub.forward = types.MethodType(_linear_forward, sub)
