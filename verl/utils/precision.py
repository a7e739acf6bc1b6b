"""Which floating-point dtype to compute in, chosen from the hardware (``dtype: auto``).

bf16 is chosen where the hardware runs it fast. Measured on 2-core boxes, a
bf16 2048^3 matmul against fp32: with AMX 5x faster; with AVX512_BF16 and no
AMX 2.6x faster on an AMD EPYC (box A) but 1.75x slower on an Intel Xeon whose
AMX is not exposed (165 vs 288 GFLOP/s; a training step 1.6x slower); without
either (plain AVX512, bf16 emulated) 4.5x slower. bf16 costs no accuracy since
its weights are rounded stochastically (`verl.utils.bf16_rounding`): on box A
the default warm start scored 0.395 on 200 WebShop test goals in bf16 (SFT and
evaluation) against 0.390 in fp32, and 0.230 when bf16 rounded to nearest. So:

* CUDA: bf16 where ``torch.cuda.is_bf16_supported()``; otherwise fp16 for
  inference (rollout, reference) and fp32 for training autocast (fp16 training
  would need loss scaling, which the trainer does not do).
* CPU: bf16 when ``/proc/cpuinfo`` lists ``amx_bf16``; fp32 when it lists no
  bf16 instructions at all. With ``avx512_bf16`` (``bf16`` on Arm) but no AMX,
  or where the flags cannot be read (not Linux), a short matmul probe decides:
  bf16 when it runs at least 1.2x the fp32 rate. The probe's result is cached
  per machine under the cache directory.

An explicit dtype always wins. `resolve_dtype` returns the choice with its
reason; `announce` prints it once per process.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from verl.utils.cache import cache_root

DTYPES = ("float32", "bfloat16", "float16")
DTYPE_CHOICES = ("auto", *DTYPES)
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")  # x86 (AMX, AVX512), Arm (FEAT_BF16)
AMX_FLAG = "amx_bf16"
PROBE_MIN_SPEEDUP = 1.2
PROBE_DTYPES = ("float32", "bfloat16")
PROBE_VERSION = 2  # part of the cache key: a new probe measures again


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


def matmul_probe(size: int = 512, rounds: int = 6, repeats: int = 4) -> dict[str, float]:
    """GFLOP/s of a ``size``^3 matmul in fp32 and bf16 on the current torch threads (see `best_rates`)."""
    import torch

    operands = {name: [torch.randn(size, size).to(getattr(torch, name)) for _ in range(2)] for name in PROBE_DTYPES}

    def seconds(name: str) -> float:
        a, b = operands[name]
        start = time.perf_counter()
        a @ b
        return time.perf_counter() - start

    for name in PROBE_DTYPES:
        seconds(name)  # warm-up: the first call builds the kernels
    return best_rates(seconds, 2 * size**3, rounds, repeats)


def best_rates(seconds: Callable[[str], float], flops: float, rounds: int, repeats: int) -> dict[str, float]:
    """GFLOP/s per dtype of `PROBE_DTYPES`, ``flops / best time``, the best over ``rounds`` x ``repeats`` timings.

    The rounds alternate the dtypes (``repeats`` timings of fp32, then of bf16, then fp32 again ...), so a burst
    of load from another process slows one round of one dtype, not the whole of one dtype's measurement: timed
    back to back beside a busy test suite, bf16 once read 0.19x the fp32 rate on a box where it runs 2.2x.
    """
    best = dict.fromkeys(PROBE_DTYPES, float("inf"))
    for _ in range(rounds):
        for name in PROBE_DTYPES:
            for _ in range(repeats):
                best[name] = min(best[name], seconds(name))
    return {name: flops / t / 1e9 for name, t in best.items()}


def _probe_cache_file() -> Path:
    return cache_root() / "precision_probe.json"


def cached_probe() -> dict[str, float]:
    """`matmul_probe`, run once per (machine, CPU, torch version, `PROBE_VERSION`) and cached on disk."""
    import torch

    key = f"{platform.node()}|{cpu_model_name()}|{platform.machine()}|torch {torch.__version__}|probe {PROBE_VERSION}"
    path = _probe_cache_file()
    try:
        cached = json.loads(path.read_text())
        if cached.get("key") == key:
            return cached["gflops"]
    except (OSError, ValueError, KeyError):
        pass
    rates = matmul_probe()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "gflops": rates}))
    except OSError:
        pass  # an unwritable cache only costs a re-probe next time
    return rates


def resolve_dtype(
    requested: str,
    device: str,
    purpose: str = "train",
    *,
    cpuinfo: str | None = None,
    cuda_bf16: bool | None = None,
    probe=cached_probe,
) -> Precision:
    """The dtype to compute in on ``device`` (``cpu`` or ``cuda[:k]``) for ``purpose`` (``train`` or ``infer``).

    ``requested`` other than ``auto`` is returned as it is. ``cpuinfo`` (the
    text of ``/proc/cpuinfo``) and ``cuda_bf16`` default to what this machine
    reports; ``probe`` (returning GFLOP/s per dtype) is only called when the
    CPU flags cannot decide: bf16 instructions without AMX, or no flags.
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
    why = ""
    if flags is not None:
        native = [f for f in NATIVE_BF16_FLAGS if f in flags]
        if AMX_FLAG in native:
            return Precision("bfloat16", f"the CPU runs bf16 natively ({', '.join(native)})")
        if not native:
            return Precision(
                "float32",
                "the CPU has no native bf16 (no amx_bf16 / avx512_bf16): bf16 would be emulated, slower than fp32",
            )
        why = f"{', '.join(native)} without AMX, "
    rates = probe()
    speedup = rates["bfloat16"] / rates["float32"]
    if speedup >= PROBE_MIN_SPEEDUP:
        return Precision("bfloat16", f"{why}matmul probe: bf16 runs {speedup:.1f}x the fp32 rate")
    return Precision("float32", f"{why}matmul probe: bf16 runs only {speedup:.2f}x the fp32 rate")


_announced: set[str] = set()


def announce(role: str, precision: Precision) -> None:
    """Print ``[precision] <role>: <dtype> (<reason>)`` once per process and role."""
    line = f"[precision] {role}: {precision.dtype} ({precision.reason})"
    if line not in _announced:
        _announced.add(line)
        print(line, flush=True)
