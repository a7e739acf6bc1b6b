"""`verl.utils.quiet_logs`: the listed vLLM messages are dropped at their loggers, other warnings are not."""

import logging

import torch

from verl.utils.quiet_logs import VLLM_NOISE, WEIGHT_LOADER, quiet_vllm


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_listed_vllm_messages_are_dropped_at_their_loggers_and_others_kept():
    quiet_vllm()
    quiet_vllm()  # idempotent: one filter per logger
    collect = Collect()
    root = logging.getLogger("vllm")
    root.addHandler(collect)
    try:
        logging.getLogger("vllm.v1.worker.cpu_worker").warning(
            "CPU backend doesn't allow to use `torch.set_num_threads` after the thread binding, skip it."
        )
        logging.getLogger("vllm.v1.engine.input_processor").warning(
            "Passing raw prompts to InputProcessor is deprecated and will be removed in the future."
        )
        logging.getLogger("vllm.config.vllm").warning(
            "Model Runner V2 requires Triton; using the V1 model runner instead."
        )
        logging.getLogger("vllm.utils.torch_utils").warning(  # an info in vLLM: a warning passes any level set here
            "Reducing Torch threads from %d to 1 for serving. "
            "Set OMP_NUM_THREADS in the external environment to override.",
            2,
        )
        logging.getLogger("vllm.v1.worker.cpu_worker").warning(
            "libtcmalloc is not found in LD_PRELOAD. For best performance, ..."
        )
        cast = "Attempted to load weight %s with dtype %s into parameter with dtype %s"
        loader = logging.getLogger(WEIGHT_LOADER)
        loader.warning(cast, "w", torch.float32, torch.bfloat16)  # the training checkpoint into the bf16 engine
        loader.warning(cast, "v", torch.float32, torch.float16)
        loader.warning(cast, "u", torch.bfloat16, torch.float16)  # any other mismatch still shows
        loader.warning("Attempted to load nested weight %r into a single parameter %r", "a.b", "a")
    finally:
        root.removeHandler(collect)
    assert collect.messages == [
        "libtcmalloc is not found in LD_PRELOAD. For best performance, ...",
        "Attempted to load weight u with dtype torch.bfloat16 into parameter with dtype torch.float16",
        "Attempted to load nested weight 'a.b' into a single parameter 'a'",
    ]
    assert {name: len(logging.getLogger(name).filters) for name in [*VLLM_NOISE, WEIGHT_LOADER]} == {
        name: 1 for name in [*VLLM_NOISE, WEIGHT_LOADER]
    }


def test_the_listed_loggers_exist_in_the_installed_vllm():
    """Each listed logger is a module of the installed vLLM that still writes the listed message."""
    import importlib.util
    from pathlib import Path

    for name, starts in [*VLLM_NOISE.items(), (WEIGHT_LOADER, ("Attempted to load weight %s with dtype %s into",))]:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, name
        source = Path(spec.origin).read_text().replace('"\n', "").replace('                "', "")
        for start in starts:
            assert start.split("`")[0][:30] in source, (name, start)
