"""Keep a run's log about the run: drop the inference engine's messages that say nothing a user can act on.

`set_torch_threads` is ``torch.set_num_threads`` as it was when this module was imported: vLLM's CPU
worker replaces the function with one that only warns once it has bound its threads, so code that sets
the count after an engine started in the process calls this one. `quiet_vllm` puts a filter on the
vLLM loggers that emit the records listed in `VLLM_NOISE` (a logger's filter sees every record that
logger creates, whenever vLLM installs or replaces its handlers), and ignores one deprecation notice
vLLM's import triggers; and on ``vllm.model_executor.models.utils`` it drops the per-weight warning for
loading a float32 checkpoint (what training saves) into a bfloat16 or float16 engine (the rollout dtype
chosen for the hardware): one line per weight at every engine start said only that.  Every other message,
other dtype mismatches included, still shows.
"""

from __future__ import annotations

import logging
import warnings

import torch

set_torch_threads = torch.set_num_threads

VLLM_NOISE: dict[str, tuple[str, ...]] = {  # logger -> the starts of its messages that are noise here
    "vllm.v1.engine.input_processor": (
        "Passing raw prompts to InputProcessor is deprecated",  # token ids are passed on purpose: the trainer tokenises
    ),
    "vllm.config.vllm": (
        "Model Runner V2 requires Triton",  # CPU: the V1 runner is the one that runs
        # rollout.enforce_eager: compiled mode started slower, ran no faster
        "Inductor compilation was disabled by user settings",
        "Enforce eager set, disabling torch.compile",  # the same setting, said again
    ),
    "vllm.v1.worker.cpu_worker": (
        "CPU backend doesn't allow to use `torch.set_num_threads`",  # the count is set through `set_torch_threads`
    ),
    "vllm.utils.torch_utils": (
        "Reducing Torch threads from",  # at the engine's warm-up only: the rollout sets the count back before each call
    ),
}


WEIGHT_LOADER = "vllm.model_executor.models.utils"
_WEIGHT_CAST = "Attempted to load weight %s with dtype %s into parameter with dtype %s"
_NARROWING = {("torch.float32", "torch.bfloat16"), ("torch.float32", "torch.float16")}


class _DropNarrowingCast(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == _WEIGHT_CAST and len(args) == 3 and (str(args[1]), str(args[2])) in _NARROWING)


class _DropNoise(logging.Filter):
    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.starts)


def quiet_vllm() -> None:
    """Filter `VLLM_NOISE` and the float32 -> engine dtype weight casts out of their loggers (once each) and hide
    vLLM's ``reduce_op`` deprecation notice."""
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.reduce_op` is deprecated", category=FutureWarning)
    for name, starts in VLLM_NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoise) for f in logger.filters):
            logger.addFilter(_DropNoise(starts))
    loader = logging.getLogger(WEIGHT_LOADER)
    if not any(isinstance(f, _DropNarrowingCast) for f in loader.filters):
        loader.addFilter(_DropNarrowingCast())
