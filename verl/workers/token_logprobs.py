"""Log-probs and entropy of the tokens a policy learns from, without materialising full logits.

For a learned token with LM-head output ``z`` (vocabulary V), under the
distribution the engine sampled from (``z / temperature``, then its top-k /
top-p filter, see `filter_logits`)::

    log p(y) = z[y] - logsumexp(z)
    H        = logsumexp(z) - sum_v softmax(z)_v * z_v

The head's output is the memory hog of a training step: ``V = 49,152`` fp32
values (192 KiB) per token, several times over with the softmax and its
gradient. Here

1. only the (row, column) pairs whose ``response_mask`` is 1 reach the head:
   not padding, not observation tokens, not the columns another row learns from;
2. they go through in chunks of ``chunk_tokens``; a chunk's logits exist only
   while it is computed. With gradients and a gradient-checkpointed model each
   chunk is checkpointed too: the forward keeps its hidden states, the backward
   recomputes its logits. Without checkpointing the backward needs only the
   chunk's log-softmax (4 bytes a vocabulary entry), so it is kept, and the head
   runs once instead of twice (a model that keeps every layer's activations
   has chosen speed over memory).
3. one log-softmax gives both statistics (``H = -sum_v p_v log p_v``), and the
   temperature divides the fp32 logits in place.

The head runs inside the model's own forward (its ``forward`` is swapped for the
chunked one while the call lasts), so FSDP gathers and reduces its weight
exactly as for an ordinary forward.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict
from functools import partial

import torch
from torch.utils.checkpoint import checkpoint

from verl.core_algos import entropy_from_log_probs
from verl.utils.prefix_tree import PackedRows, pack_rows
from verl.utils.torch_functional import filter_logits, response_window
from verl.workers.rollout.base import Sampling


def scoring_sampling(sampling: Sampling) -> dict:
    """The ``sampling`` dict (`learned_token_logprobs`) under which tokens sampled with ``sampling`` are scored: the
    same distribution, except that tokens generated at temperature 0 (greedy, `Sampling.generated`: each one the
    most likely) are scored under the model's raw distribution, temperature 1, since temperature 0 has no
    log-probs."""
    return {**asdict(sampling), "temperature": 1.0 if sampling.temperature == 0 else sampling.temperature}


def _chunk_stats(
    hidden: torch.Tensor, head, labels: torch.Tensor, sampling: dict, with_entropy: bool, entropy_grad: bool
) -> torch.Tensor:
    """``(n, 2)`` fp32: log p(label) and entropy (0 without ``with_entropy``) for ``n`` hidden states."""
    logits = head(hidden).float()
    if sampling["temperature"] != 1.0:
        logits.div_(sampling["temperature"])  # in place: neither the matmul's nor the cast's backward needs this output
    logits = filter_logits(logits, sampling["top_k"], sampling["top_p"], keep=labels)
    log_p = torch.log_softmax(logits, dim=-1)
    log_prob = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        entropy = torch.zeros_like(log_prob)
    else:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = entropy_from_log_probs(log_p)
    return torch.stack([log_prob, entropy], dim=-1)


@contextmanager
def _head_replaced(module: torch.nn.Module, forward):
    head = module.get_output_embeddings()
    original = head.forward
    own = head.__dict__.get("forward")  # a forward set on this layer (`verl.utils.bf16_rounding`) stays
    head.forward = partial(forward, original)
    try:
        yield
    finally:
        if own is None:
            del head.forward  # back to the class's forward
        else:
            head.forward = own


def head_stats_at(
    module: torch.nn.Module,
    inputs: dict[str, torch.Tensor],
    positions: torch.Tensor,
    picked: torch.Tensor,
    labels: torch.Tensor,
    sampling: dict,
    with_entropy: bool,
    entropy_grad: bool = False,
    chunk_tokens: int = 512,
) -> torch.Tensor:
    """``(N, 2)`` fp32: log p(label) and entropy at the N picked (row, position) pairs.

    ``inputs``: ``input_ids``, ``attention_mask``, ``position_ids`` ``(B, L)``;
    ``positions`` ``(K,)``: sequence positions whose output is wanted in some row;
    ``picked`` ``(B, K)`` bool: the pairs to score, N of them, row-major;
    ``labels`` ``(N,)``: the token each picked pair predicts.
    With gradients, each chunk's logits are recomputed in the backward when ``module`` is
    gradient-checkpointed (HF's ``is_gradient_checkpointing``), and kept otherwise.
    """

    recompute = torch.is_grad_enabled() and getattr(module, "is_gradient_checkpointing", True)

    def chunked_head(head, hidden: torch.Tensor) -> torch.Tensor:  # hidden (B, K, H) -> (N, 2)
        flat = hidden[picked]
        parts = []
        for s in range(0, flat.shape[0], chunk_tokens):
            fn = partial(
                _chunk_stats,
                head=head,
                labels=labels[s : s + chunk_tokens],
                sampling=sampling,
                with_entropy=with_entropy,
                entropy_grad=entropy_grad,
            )
            h = flat[s : s + chunk_tokens]
            parts.append(checkpoint(fn, h, use_reentrant=False) if recompute else fn(h))
        return torch.cat(parts)

    with _head_replaced(module, chunked_head):
        return module(**inputs, use_cache=False, logits_to_keep=positions).logits


def learned_token_logprobs(
    module: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    sampling: dict,
    with_entropy: bool,
    entropy_grad: bool = False,
    chunk_tokens: int = 512,
    tree_packed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs and (with ``with_entropy``) entropies of ``batch["responses"]``, both ``(B, T)``.

    ``batch`` holds ``input_ids``, ``attention_mask``, ``position_ids``,
    ``responses`` and ``response_mask`` (layout in `verl.utils.torch_functional`).
    Both outputs are 0 wherever ``response_mask`` is 0. The entropy carries a
    gradient only with ``entropy_grad``. ``sampling`` holds ``temperature``,
    ``top_k``, ``top_p``. Run it under the caller's autocast. With ``tree_packed``
    the rows run as one prefix tree (`tree_token_stats`): each learned token is
    scored once and gathered back to every ``(row, column)`` through it, whose
    backward sums the rows' gradients.
    """
    responses, mask = batch["responses"], batch["response_mask"].bool()
    B, T = responses.shape
    L = batch["input_ids"].shape[1]
    if tree_packed:
        tree = pack_rows(batch["input_ids"], batch["attention_mask"])
        rows, cols = mask.nonzero(as_tuple=True)
        stats = tree_token_stats(
            module, tree, tree.index[:, L - T :][rows, cols], sampling, with_entropy, entropy_grad, chunk_tokens
        )
        log_prob = stats.new_zeros(B, T).index_put((rows, cols), stats[:, 0])
        return log_prob, (stats.new_zeros(B, T).index_put((rows, cols), stats[:, 1]) if with_entropy else None)
    lead, trail = response_window(batch["attention_mask"], T)
    cols = mask[:, : T - trail].any(dim=0).nonzero().flatten()
    picked = mask[:, cols]  # (B, K): the pairs that learn
    if not picked.any():  # every row failed: one pair keeps the graph (and the FSDP collectives) alive
        cols = torch.zeros(1, dtype=torch.long, device=mask.device)
        picked = torch.zeros(B, 1, dtype=torch.bool, device=mask.device)
        picked[0, 0] = True
    start = L - T - lead  # first response column inside the trimmed window
    window = {k: batch[k][:, lead : L - trail] for k in ("input_ids", "attention_mask", "position_ids")}
    stats = head_stats_at(
        module,
        window,
        cols + (start - 1),
        picked,
        responses[:, cols][picked],
        sampling,
        with_entropy,
        entropy_grad,
        chunk_tokens,
    )
    rows, col_idx = picked.nonzero(as_tuple=True)
    keep = mask.to(stats.dtype)

    def to_grid(values: torch.Tensor) -> torch.Tensor:
        grid = values.new_zeros(B, T).index_put((rows, cols[col_idx]), values)
        return grid * keep  # 0 wherever the row does not learn (the stand-in pair of an all-failed batch included)

    return to_grid(stats[:, 0]), (to_grid(stats[:, 1]) if with_entropy else None)


def tree_token_stats(
    module: torch.nn.Module,
    tree: PackedRows,
    nodes: torch.Tensor,
    sampling: dict,
    with_entropy: bool,
    entropy_grad: bool = False,
    chunk_tokens: int = 512,
) -> torch.Tensor:
    """``(len(nodes), 2)`` fp32: log p and entropy (0 without ``with_entropy``) of each packed token in
    ``nodes``, predicted from its parent's hidden state; each distinct token goes through the LM head once.

    ``module`` runs ``tree_sdpa`` attention (`verl.utils.prefix_tree.use_tree_attention`). With no node a
    stand-in pair still runs, so the graph (and the FSDP collectives) stay alive; the empty result is
    part of that graph.
    """
    if len(nodes):
        unique, inverse = torch.unique(nodes, return_inverse=True)
        positions, labels = tree.parent[unique], tree.input_ids[0, unique]
    else:
        inverse = nodes
        positions, labels = torch.zeros(1, dtype=torch.long, device=nodes.device), tree.input_ids[0, :1]
    picked = torch.ones(1, len(positions), dtype=torch.bool, device=nodes.device)
    stats = head_stats_at(
        module, tree.model_inputs(), positions, picked, labels, sampling, with_entropy, entropy_grad, chunk_tokens
    )
    return stats[inverse]
