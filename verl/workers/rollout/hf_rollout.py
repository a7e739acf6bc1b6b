"""Hugging Face ``generate`` as a rollout engine: the fallback, and the reference in tests.

Requests are grouped by identical sampling settings (seeds aside) and run as
left-padded batches. A batch is seeded with its first request's seed, so a
request's sample is reproducible only within the same batch composition; the
vLLM engine seeds each request on its own.
"""

from __future__ import annotations

from typing import Iterable

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from verl.utils.bf16_rounding import engine_weight
from verl.workers.rollout.base import GenerationOutput, RolloutEngine, SamplingParams


class HFRollout(RolloutEngine):
    """``weight_rounding``: how fp32 weights (the folder's, `update_weights`') become a bf16 engine's:
    ``stochastic`` with the trainer's dither, or ``nearest`` (`verl.utils.bf16_rounding.engine_weight`, as
    for the vLLM engine)."""

    def __init__(
        self,
        model_path: str,
        dtype: str = "float32",
        device: str = "cpu",
        batch_size: int = 32,
        weight_rounding: str = "stochastic",
    ):
        super().__init__()
        self.device = device
        self.batch_size = batch_size
        self.dtype, self.weight_rounding = dtype, weight_rounding
        # a bf16 engine loads the folder in fp32 and takes its weights through `update_weights`' rounding
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        if dtype != "float32":
            weights = [(name, p.detach()) for name, p in self.model.named_parameters()]  # stays fp32 past `.to`
            self.model.to(getattr(torch, dtype))
            self.update_weights(weights)
        self.model.to(device).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.pad_id = (
            self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        )
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}

    def _key(self, p: SamplingParams) -> tuple:
        return (p.temperature, p.top_p, p.top_k, p.max_tokens, tuple(p.stop), tuple(p.stop_token_ids))

    def generate(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[GenerationOutput]:
        if len(prompts) != len(params):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} sampling params")
        results: list[GenerationOutput | None] = [None] * len(prompts)
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(params):
            groups.setdefault(self._key(p), []).append(i)
        for rows in groups.values():
            for start in range(0, len(rows), self.batch_size):
                chunk = rows[start : start + self.batch_size]
                for i, out in zip(chunk, self._generate_batch([prompts[i] for i in chunk], params[chunk[0]])):
                    results[i] = out
        return results  # type: ignore[return-value]

    @torch.no_grad()
    def _generate_batch(self, prompts: list[list[int]], p: SamplingParams) -> list[GenerationOutput]:
        width = max(len(x) for x in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, x in enumerate(prompts):
            ids[row, width - len(x) :] = torch.tensor(x)
            mask[row, width - len(x) :] = 1
        stop_ids = self.eos_ids | set(p.stop_token_ids)
        if p.seed is not None:
            torch.manual_seed(p.seed)
        greedy = p.temperature == 0
        out = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            do_sample=not greedy,
            temperature=None if greedy else p.temperature,
            top_p=None if greedy else p.top_p,
            top_k=None if greedy or p.top_k <= 0 else p.top_k,
            max_new_tokens=p.max_tokens,
            eos_token_id=sorted(stop_ids),
            pad_token_id=self.pad_id,
            stop_strings=p.stop or None,
            tokenizer=self.tokenizer if p.stop else None,
            output_scores=True,
            return_dict_in_generate=True,
        )
        new = out.sequences[:, width:].cpu()
        # scores are the processed logits (after temperature, top-k, top-p):
        # the distribution each token was sampled from
        logprobs = torch.stack(out.scores, dim=1).float().log_softmax(-1).cpu()
        results = []
        for row in range(len(prompts)):
            tokens, lps, reason = [], [], "length"
            for t in range(new.shape[1]):
                tok = int(new[row, t])
                tokens.append(tok)
                lps.append(float(logprobs[row, t, tok]))
                if tok in stop_ids:
                    reason = "stop"
                    break
                if p.stop and any(s in self.tokenizer.decode(tokens) for s in p.stop):
                    reason = "stop"
                    break
            results.append(GenerationOutput(tokens, lps, reason))
        return results

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        state = {name: engine_weight(t, name, self.dtype, self.weight_rounding) for name, t in named_tensors}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (k == "lm_head.weight" and self.model.config.tie_word_embeddings)]
        if missing or unexpected:
            raise ValueError(
                f"weight update does not match the model: missing={missing[:5]} unexpected={unexpected[:5]}"
            )
