"""Tensor helpers shared by the actor and the critic.

Sequence layout used everywhere: ``input_ids = cat(prompts, responses)`` with
prompts left-padded to P and responses right-padded to T; ``attention_mask``
is 1 on every real token (model and observation tokens alike);
``position_ids = clamp(cumsum(attention_mask) - 1, min=0)``. The output for
response token t comes from position ``P + t - 1`` (the state before it).
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """``clamp(cumsum(mask) - 1, min=0)``: real tokens count 0, 1, 2, ... from the first real one."""
    return torch.clamp(attention_mask.long().cumsum(dim=-1) - 1, min=0)


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[label]`` in fp32, without materialising the full log-softmax twice."""
    flat = -F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), reduction="none")
    return flat.view(labels.shape)


FILTERED_LOGIT = -1e9  # finite, so entropy and log-softmax stay free of inf * 0


def filter_logits(
    logits: torch.Tensor, top_k: int = -1, top_p: float = 1.0, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """Set logits outside the sampler's top-k / top-p set to `FILTERED_LOGIT`, as the rollout engine did.

    Over the last dim, ascending: top-k drops logits below the k-th largest;
    top-p then drops the tokens whose cumulative probability (from the
    smallest, after top-k) is at most ``1 - top_p``, always keeping the
    largest. ``keep`` (token ids, ``logits.shape[:-1]``) are never dropped: a
    sampled token stays scorable when float rounding differs from the engine's.
    Returns ``logits`` unchanged when ``top_k <= 0`` and ``top_p >= 1``.
    """
    vocab = logits.shape[-1]
    use_k, use_p = 0 < top_k < vocab, top_p < 1.0
    if not (use_k or use_p):
        return logits
    remove = torch.zeros_like(logits, dtype=torch.bool)
    if use_k:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        remove |= logits < kth
    if use_p:
        ascending, order = logits.masked_fill(remove, float("-inf")).sort(dim=-1)
        cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative <= 1 - top_p
        drop[..., -1] = False
        remove |= torch.zeros_like(remove).scatter(-1, order, drop)
    if keep is not None:
        remove.scatter_(-1, keep.unsqueeze(-1), False)
    return logits.masked_fill(remove, FILTERED_LOGIT)


def autocast(device: str, dtype: str):
    """bf16/fp16 autocast on ``device``, or nothing for fp32."""
    if dtype == "float32":
        return nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=getattr(torch, dtype))


def response_window(attention_mask: torch.Tensor, response_len: int) -> tuple[int, int]:
    """Columns that are padding in every row: ``(lead, trail)`` to drop on the left and right.

    ``trail`` never reaches into the prompt and keeps at least one response column.
    """
    mask = attention_mask.bool()
    lead = int((~mask).long().cumprod(dim=-1).sum(dim=-1).min())
    trail = int((~mask.flip(-1)).long().cumprod(dim=-1).sum(dim=-1).min())
    prompt_len = mask.shape[1] - response_len
    return min(lead, prompt_len - 1), min(trail, response_len - 1)


def forward_response(
    module: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    response_len: int,
) -> tuple[torch.Tensor, int]:
    """Run ``module`` on the trimmed batch; return its output for the response window and that window's width T'.

    The output (logits or values) has shape ``(B, T', ...)``: entry t predicts response token t.
    """
    lead, trail = response_window(attention_mask, response_len)
    end = input_ids.shape[1] - trail
    out = module(
        input_ids=input_ids[:, lead:end],
        attention_mask=attention_mask[:, lead:end],
        position_ids=position_ids[:, lead:end],
        use_cache=False,
    )
    out = out.logits if hasattr(out, "logits") else out
    start = input_ids.shape[1] - response_len - lead
    width = response_len - trail
    return out[:, start - 1 : start - 1 + width], width


def pad_right(x: torch.Tensor, width: int) -> torch.Tensor:
    """Zero-pad dim 1 of ``x`` up to ``width``."""
    if x.shape[1] == width:
        return x
    return F.pad(x, (0, width - x.shape[1]))


def plan_micro_batches(attention_mask: torch.Tensor, max_rows: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Split rows into micro-batches.

    Without a token budget: consecutive groups of ``max_rows``. With one
    (dynamic batching): rows sorted by real length, longest first, packed
    greedily while ``rows * longest_row <= max_tokens`` (and ``rows <= max_rows``);
    a row longer than the budget gets a micro-batch of its own.
    """
    n = attention_mask.shape[0]
    if max_tokens is None:
        return [np.arange(s, min(s + max_rows, n)) for s in range(0, n, max_rows)]
    lengths = attention_mask.sum(dim=-1).cpu().numpy()
    order = np.argsort(-lengths, kind="stable")
    groups, current, longest = [], [], 0
    for row in order:
        longest_if_added = max(longest, int(lengths[row]))
        if current and (len(current) + 1 > max_rows or (len(current) + 1) * longest_if_added > max_tokens):
            groups.append(np.array(current))
            current, longest_if_added = [], int(lengths[row])
        current.append(row)
        longest = longest_if_added
    if current:
        groups.append(np.array(current))
    return groups
