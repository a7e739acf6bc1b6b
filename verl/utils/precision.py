"""Which floating-point dtype to compute in, chosen from the hardware (``dtype: auto``).

bf16 only pays where the hardware runs it much faster, because it costs accuracy: on box A (AMD EPYC with
AVX512_BF16, no AMX) the default warm start trained and evaluated in bf16 scored 0.230 on 200 WebShop test goals,
in fp32 0.390 (and 0.180 / 0.245 with the two precisions crossed), for 1.4x faster SFT and decoding. So:

* CUDA: bf16 where ``torch.cuda.is_bf16_supported()``; otherwise fp16 for
  inference (rollout, reference) and fp32 for training autocast (fp16 training
  would need loss scaling, which the trainer does not do).
* CPU: bf16 when ``/proc/cpuinfo`` lists ``amx_bf16`` (a bf16 matmul ran 5x fp32); fp32 otherwise: with
  AVX512_BF16 (``bf16`` on Arm) and no AMX, bf16 ran 1.4x faster on box A and 1.75x slower on an Intel Xeon
  whose AMX is not exposed; without them it is emulated (4.5x slower); where the flags cannot be read, fp32.

An explicit dtype always wins. `resolve_dtype` returns the choice with its
reason; `announce` prints it once per process.

Where bf16 is chosen, fp32 weights become bf16 by stochastic rounding, not to nearest
(`verl.utils.bf16_rounding`).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

DTYPES = ("float32", "bfloat16", "float16")
DTYPE_CHOICES = ("auto", *DTYPES)
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")  # x86 (AMX, AVX512), Arm (FEAT_BF16)
AMX_FLAG = "amx_bf16"


@dataclass(frozen=True)
class Precision:
    """A resolved dtype (``float32`` / ``bfloat16`` / ``float16``) and why it was chosen."""

    dtype: str
    reason: str


def read_cpu_flags(cpuinfo: str | None = None) -> set[str] | None:
    """The CPU feature flags from ``/proc/cpuinfo`` (``flags`` on x86, ``Features`` on Arm); None where unreadable."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return None


def cpu_model_name(cpuinfo: str | None = None) -> str:
    """``model name`` from ``/proc/cpuinfo``, else ``platform.processor()``."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or platform.machine()


def describe_cpu(torch_threads: bool = True) -> str:
    """One line for benchmark output: CPU model, native-bf16 flags, cores (and torch threads)."""
    flags = read_cpu_flags()
    if flags is None:
        native = "flags unreadable"
    else:
        found = [f for f in NATIVE_BF16_FLAGS if f in flags]
        native = ", ".join(found) if found else "no native bf16 (no amx_bf16 / avx512_bf16)"
    line = f"CPU {cpu_model_name()} | {native} | {os.cpu_count()} cores"
    if torch_threads:
        import torch

        line += f", torch threads {torch.get_num_threads()}"
    return line


def resolve_dtype(
    requested: str,
    device: str,
    purpose: str = "train",
    *,
    cpuinfo: str | None = None,
    cuda_bf16: bool | None = None,
) -> Precision:
    """The dtype to compute in on ``device`` (``cpu`` or ``cuda[:k]``) for ``purpose`` (``train`` or ``infer``).

    ``requested`` other than ``auto`` is returned as it is. ``cpuinfo`` (the text of ``/proc/cpuinfo``) and
    ``cuda_bf16`` default to what this machine reports.
    """
    if requested not in DTYPE_CHOICES:
        raise ValueError(f"dtype must be one of {list(DTYPE_CHOICES)}, got {requested!r}")
    if purpose not in ("train", "infer"):
        raise ValueError(f"purpose must be 'train' or 'infer', got {purpose!r}")
    if requested != "auto":
        return Precision(requested, "set explicitly in the config")
    if device.startswith("cuda"):
        if cuda_bf16 is None:
            import torch

            cuda_bf16 = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        if cuda_bf16:
            return Precision("bfloat16", "the GPU supports bf16")
        if purpose == "infer":
            return Precision("float16", "the GPU has no bf16; fp16 for inference")
        return Precision("float32", "the GPU has no bf16, and fp16 training would need loss scaling")
    flags = read_cpu_flags(cpuinfo)
    if flags is None:
        return Precision("float32", "the CPU flags cannot be read")
    native = [f for f in NATIVE_BF16_FLAGS if f in flags]
    if AMX_FLAG in native:
        return Precision("bfloat16", f"the CPU runs bf16 natively ({', '.join(native)})")
    if native:
        return Precision("float32", f"{', '.join(native)} without AMX: bf16 gains too little for its loss of accuracy")
    return Precision(
        "float32", "the CPU has no native bf16 (no amx_bf16 / avx512_bf16): bf16 would be emulated, slower than fp32"
    )


_announced: set[str] = set()


def announce(role: str, precision: Precision) -> None:
    """Print ``[precision] <role>: <dtype> (<reason>)`` once per process and role."""
    line = f"[precision] {role}: {precision.dtype} ({precision.reason})"
    if line not in _announced:
        _announced.add(line)
        print(line, flush=True)
