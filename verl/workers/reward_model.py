"""The learned reward model: a causal-LM backbone with a scalar head, and its Ray worker.

A reward-model folder is a Hugging Face ``*ForSequenceClassification`` with one label (what
``python -m verl.trainer.main_rm`` saves; ``AutoModelForSequenceClassification`` loads it anywhere).
Its score of a token sequence read at position ``t`` is

    r(x_{<=t}) = w^T h_t                 (h_t: the backbone's last hidden state at t)

so one forward pass gives the score of every prefix. A trajectory is scored at its **last model
token** (its final action, before the env's verdict on it), each turn at that turn's last model
token (``turn_ends``). Rows that share a prefix (a group's prompt) run it once when tree-packed
(`verl.utils.prefix_tree`), exactly as the critic's values do.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from torch import nn

from verl.protocol import DataProto
from verl.single_controller.base import Dispatch, Worker, register
from verl.utils import fsdp_utils
from verl.utils.precision import announce, resolve_dtype
from verl.utils.prefix_tree import pack_rows
from verl.utils.quiet_logs import set_torch_threads
from verl.utils.torch_functional import autocast, position_ids_from_mask
from verl.utils.typed_config import from_dict
from verl.workers.config import RewardModelConfig
from verl.workers.trainable import TrainableModule


def reward_model_problem(path: str) -> str | None:
    """Why ``path`` is not a reward-model folder (no config, not a one-label sequence classifier), or None."""
    config = Path(path) / "config.json"
    if not path or not config.is_file():
        return (
            f"{path!r} is not a Hugging Face model folder (no config.json); "
            "train one with python -m verl.trainer.main_rm"
        )
    data = json.loads(config.read_text())
    arch = (data.get("architectures") or [""])[0]
    labels = len(data.get("id2label") or {"0": ""})
    if not arch.endswith("ForSequenceClassification") or labels != 1:
        return (
            f"{path} holds a {arch or 'model of no named architecture'} with {labels} label(s), not a reward model "
            "(a *ForSequenceClassification with one label); train one with python -m verl.trainer.main_rm"
        )
    return None


def load_score_model(path: str, attn_implementation: str = "sdpa") -> nn.Module:
    """A one-label ``AutoModelForSequenceClassification`` in fp32 from ``path``; from a causal-LM folder the
    head is new (drawn from N(0, 0.02^2)), from a reward-model folder it is the trained one."""
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # a new head is expected when starting from a causal LM: no warning for it
    try:
        module = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=1, dtype=torch.float32, attn_implementation=attn_implementation
        )
    finally:
        logging.set_verbosity(verbosity)
    if module.config.pad_token_id is None:  # transformers' own pooling needs one; ours reads positions instead
        module.config.pad_token_id = module.config.eos_token_id if isinstance(module.config.eos_token_id, int) else 0
    return module


def position_scores(
    module: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, tree_packed: bool = False
) -> torch.Tensor:
    """``(B, L)`` fp32: ``r(x_{<=t})`` at every real position ``t`` (0 on padding). ``tree_packed``: the rows run
    as one prefix tree, each shared prefix once (the module's attention must be ``tree_sdpa``)."""
    if tree_packed:
        tree = pack_rows(input_ids, attention_mask)
        hidden = module.base_model(**tree.model_inputs()).last_hidden_state
        packed = module.score(hidden).squeeze(-1)[0].float()
        return packed[tree.index.clamp_min(0)] * (tree.index >= 0)
    hidden = module.base_model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids_from_mask(attention_mask)
    ).last_hidden_state
    return module.score(hidden).squeeze(-1).float() * attention_mask


class RewardModelWorker(Worker):
    """One rank of the reward-model group: frozen weights, FSDP-sharded like the critic, no optimiser."""

    def __init__(self, config: dict | RewardModelConfig):
        super().__init__()
        self.config = from_dict(RewardModelConfig, config, "reward_model")
        set_torch_threads(self.config.num_threads)
        self.model: TrainableModule | None = None

    @register(Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        cfg = self.config
        self.init_distributed(cfg.device)
        precision = resolve_dtype(cfg.dtype, cfg.device, "infer")
        announce(f"reward model rank {self.rank}", precision)
        module = load_score_model(cfg.model.path, cfg.model.attn_implementation).to(cfg.device)
        module.requires_grad_(False)
        module = fsdp_utils.shard_module(module, cfg.device)
        self.model = TrainableModule(module, None, None, cfg.device, precision.dtype, tree_packing=cfg.tree_packing)
        set_torch_threads(cfg.num_threads)

    @register(Dispatch.DP_COMPUTE_PROTO)
    def compute_rm_score(self, data: DataProto) -> DataProto:
        """``rm_scores`` ``(B, T)``: the score of the sequence up to and including each response token
        (``r(x_{<=P+t})``), 0 on padding; ``meta_info["metrics"]`` holds the pass's time."""
        if self.model is None:
            raise RuntimeError("RewardModelWorker.init_model was not called")
        model, cfg = self.model, self.config
        start = time.perf_counter()
        T = data.batch["responses"].shape[1]

        def fn(mb: DataProto) -> dict[str, torch.Tensor]:
            mb = mb.to(model.device)
            with autocast(model.device, model.mixed_precision):
                scores = position_scores(
                    model.module,
                    mb.batch["input_ids"],
                    mb.batch["attention_mask"],
                    bool(mb.meta_info.get("tree_packed")),
                )
            return {"rm_scores": scores[:, -T:]}

        model.module.eval()
        out = model.map_micro_batches(
            data, fn, cfg.micro_batch_size_per_gpu, cfg.max_token_len_per_gpu if cfg.use_dynamic_bsz else None
        )
        return DataProto.from_dict(out, meta_info={"metrics": {"timing_s/reward_model": time.perf_counter() - start}})

    def shutdown(self) -> None:
        self.leave_distributed()
