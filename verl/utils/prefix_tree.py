"""Tree packing: rows that share a prefix run it through the model once.

A micro-batch's rows (their real tokens, padding dropped) form a prefix tree
(a trie over token ids). Sorted lexicographically, row ``i`` shares exactly
``lcp(i, i - 1)`` leading tokens with the rows before it (the longest common
prefix with any earlier row is the one with its predecessor), so the tree
serialised depth-first is every row's tokens after that shared part, in sorted
order::

    N = sum_i (len_i - lcp(i, i - 1))          tokens through the model, against sum_i len_i

Each packed token gets its depth as position id (its position in every row
through it) and sees exactly its ancestors: the row's shared prefix (tokens
packed earlier, gathered by index) and the tokens before it in its own
segment (causal). `tree_attention` computes that per segment with
``scaled_dot_product_attention``: a segment of ``s`` tokens after a shared
prefix of ``p`` attends over ``p + s`` keys, never over the whole pack. With
a boolean mask SDPA computes all ``s * (p + s)`` scores; a long segment
after a short prefix (``s >= long_segment``, ``p <= s / 2``) instead runs
causally over its whole root-to-leaf path, the prefix's own queries filling
the first ``p`` rows (their outputs are dropped, so their gradient is zero):
``(p + s)^2 / 2`` scores, and causal kernels skip the blocks above the
diagonal, which masked ones cannot.

A token's hidden state depends only on its ancestors, so it equals the one
each row through it computes in the flat layout (to float round-off). The
workers gather per-token results (log-probs, entropies, values) back to the
flat ``(B, T)`` grid by `PackedRows.index` and compute every loss there
unchanged: a shared token's gradient is then the sum of what each row through
it contributes (the gather's backward adds them), for any per-row advantage,
clip, KL, entropy and normaliser.

The attention is registered with transformers as ``tree_sdpa``: a model whose
``config._attn_implementation`` is ``tree_sdpa`` runs ordinary (padded)
batches through transformers' own SDPA path and packed ones (a ``packed_tree``
keyword) through `tree_attention`. The same code runs on CUDA, where SDPA picks
its fused kernels (flash for a causal segment or path, memory-efficient
attention for one with a boolean mask).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

TREE_ATTENTION = "tree_sdpa"
LONG_SEGMENT = 768  # shortest segment that runs causally over its path (fwd+bwd 1.0-1.55x faster at 1,000-2,000
# tokens on box A's CPU, 0.86-1.09x at 500: docs/performance.md, "Long segments")


@dataclass
class Segment:
    """Packed tokens ``[start, end)`` that one row adds after the ``prefix`` it shares with earlier rows.

    ``keys``: packed indices the segment attends over (the prefix's, then its own), None without a
    prefix (plain causal attention over the segment); ``mask``: ``(end - start, len(keys))`` bool,
    True where a query may look (the whole prefix, its own tokens up to itself), or None with ``keys``
    when the segment runs causally over its whole path (``keys`` as queries too, the last
    ``end - start`` outputs kept).
    """

    start: int
    end: int
    keys: torch.Tensor | None
    mask: torch.Tensor | None


@dataclass
class PackedRows:
    """A micro-batch packed as one prefix tree of N tokens.

    ``input_ids``, ``position_ids``: ``(1, N)``; ``index``: ``(B, L)``, the packed position of every
    real token of the flat layout, -1 on padding; ``parent``: ``(N,)``, the packed position of the
    token before each one in its rows (-1 for a first token); ``flat_tokens``: real tokens of the rows.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    index: torch.Tensor
    parent: torch.Tensor
    segments: list[Segment]
    flat_tokens: int

    @property
    def tokens(self) -> int:
        """N: the tokens the model runs."""
        return int(self.input_ids.shape[1])

    def model_inputs(self) -> dict:
        """Keyword arguments for a ``tree_sdpa`` model's forward. The 4-D placeholder mask makes
        transformers skip building an ``N x N`` mask; `tree_attention` never reads it."""
        placeholder = torch.ones(1, 1, 1, 1, dtype=torch.bool, device=self.input_ids.device)
        return {
            "input_ids": self.input_ids,
            "position_ids": self.position_ids,
            "attention_mask": placeholder,
            "packed_tree": self,
        }


def row_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[np.ndarray]:
    """Each row's real tokens (where ``attention_mask`` is 1), in order."""
    ids, mask = input_ids.cpu().numpy(), attention_mask.cpu().numpy().astype(bool)
    return [ids[b][mask[b]] for b in range(ids.shape[0])]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def sorted_rows(rows: list[np.ndarray]) -> tuple[list[int], list[int]]:
    """Row order (lexicographic by tokens) and each sorted row's prefix shared with its predecessor."""
    order = sorted(range(len(rows)), key=lambda b: rows[b].tolist())
    shared = [0] + [common_prefix(rows[order[i - 1]], rows[order[i]]) for i in range(1, len(order))]
    return order, shared


def tree_size(rows: list[np.ndarray]) -> int:
    """Tokens in the prefix tree of ``rows``: ``sum_i (len_i - lcp(i, i - 1))`` in sorted order."""
    order, shared = sorted_rows(rows)
    return sum(len(rows[b]) - s for b, s in zip(order, shared))


def pack_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor, long_segment: int | None = None) -> PackedRows:
    """Pack ``(B, L)`` rows (any padding, marked by ``attention_mask``) into one prefix tree; a segment of at
    least ``long_segment`` tokens (default `LONG_SEGMENT`) after a prefix at most half as long attends
    causally over its whole path."""
    long_segment = LONG_SEGMENT if long_segment is None else long_segment
    B, L = input_ids.shape
    device = input_ids.device
    rows = row_tokens(input_ids, attention_mask)
    columns = [np.flatnonzero(m) for m in attention_mask.cpu().numpy().astype(bool)]
    order, shared = sorted_rows(rows)
    index = np.full((B, L), -1, dtype=np.int64)
    tokens, depth, parent, spans = [], [], [], []
    previous: np.ndarray | None = None  # packed positions of the previous sorted row's tokens
    n = 0
    for b, p in zip(order, shared):
        own = len(rows[b]) - p
        packed = (
            np.concatenate([previous[:p], np.arange(n, n + own)]) if previous is not None else np.arange(n, n + own)
        )
        index[b, columns[b]] = packed
        if own:
            tokens.append(rows[b][p:])
            depth.append(np.arange(p, p + own))
            parent.append(packed[p - 1 : p - 1 + own] if p else np.concatenate([[-1], packed[: own - 1]]))
            spans.append((n, n + own, packed[:p]))
            n += own
        previous = packed
    if n == 0:
        raise ValueError("pack_rows: no real token in any row")
    segments = []
    for start, end, prefix in spans:
        if len(prefix) == 0:
            segments.append(Segment(start, end, None, None))
            continue
        s = end - start
        keys = torch.as_tensor(np.concatenate([prefix, np.arange(start, end)]), device=device)
        if s >= long_segment and 2 * len(prefix) <= s:
            segments.append(Segment(start, end, keys, None))
            continue
        mask = torch.ones(s, len(prefix) + s, dtype=torch.bool, device=device)
        mask[:, len(prefix) :] = torch.ones(s, s, dtype=torch.bool, device=device).tril()
        segments.append(Segment(start, end, keys, mask))
    return PackedRows(
        input_ids=torch.as_tensor(np.concatenate(tokens), device=device).unsqueeze(0),
        position_ids=torch.as_tensor(np.concatenate(depth), device=device).unsqueeze(0),
        index=torch.as_tensor(index, device=device),
        parent=torch.as_tensor(np.concatenate(parent), device=device),
        segments=segments,
        flat_tokens=sum(len(r) for r in rows),
    )


def plan_tree_micro_batches(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, max_rows: int, max_tokens: int | None
) -> tuple[list[np.ndarray], list[int]]:
    """Split rows into micro-batches whose prefix trees fit the budget; returns them and their trees' sizes.

    Rows are taken in lexicographic order, so rows that share a prefix land together. With a token
    budget each micro-batch's tree holds at most ``max_tokens`` tokens (a row longer than that alone
    gets its own); the row cap does not apply, since the budget bounds the activations. Without one,
    consecutive groups of ``max_rows`` sorted rows.
    """
    rows = row_tokens(input_ids, attention_mask)
    if not rows:
        return [], []
    order, shared = sorted_rows(rows)
    groups, sizes, current, size = [], [], [], 0
    for b, p in zip(order, shared):
        added = len(rows[b]) - (p if current else 0)
        full = len(current) == max_rows if max_tokens is None else size + added > max_tokens
        if current and full:
            groups.append(np.array(current))
            sizes.append(size)
            current, size, added = [], 0, len(rows[b])
        current.append(b)
        size += added
    groups.append(np.array(current))
    sizes.append(size)
    return groups, sizes


def tree_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    packed_tree: PackedRows | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: ``(1, H, N, d)`` queries over a packed tree, each segment over
    its ancestors' keys; without ``packed_tree``, transformers' own SDPA attention.
    Returns ``(1, N, H, d)`` as every transformers attention function does."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    if packed_tree is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    parts = []
    for seg in packed_tree.segments:
        q = query[:, :, seg.start : seg.end]
        if seg.keys is None:
            k, v = key[:, :, seg.start : seg.end], value[:, :, seg.start : seg.end]
            parts.append(F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, scale=scaling))
        elif seg.mask is None:  # causal over the path; the prefix's rows only pad the query
            q, k, v = (x.index_select(2, seg.keys) for x in (query, key, value))
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, scale=scaling)
            parts.append(out[:, :, len(seg.keys) - (seg.end - seg.start) :])
        else:
            k, v = key.index_select(2, seg.keys), value.index_select(2, seg.keys)
            parts.append(F.scaled_dot_product_attention(q, k, v, attn_mask=seg.mask, dropout_p=dropout, scale=scaling))
    out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)
    return out.transpose(1, 2).contiguous(), None


def use_tree_attention(module: torch.nn.Module) -> None:
    """Register `tree_attention` with transformers and switch every transformers model inside ``module``
    (the module itself, a value model's backbone) from SDPA to it.

    Padded batches keep transformers' SDPA path and mask; packed ones pass ``packed_tree``. Raises
    ``ValueError`` when a model runs another attention, or when ``module`` holds no transformers model.
    """
    from transformers import AttentionInterface, PreTrainedModel
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(TREE_ATTENTION, tree_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(TREE_ATTENTION, sdpa_mask)
    configs = {id(m.config): m.config for m in module.modules() if isinstance(m, PreTrainedModel)}
    if not configs:
        raise ValueError(f"tree packing needs a transformers model; {type(module).__name__} holds none")
    for config in configs.values():
        if config._attn_implementation not in ("sdpa", TREE_ATTENTION):
            raise ValueError(f"tree packing runs on SDPA attention; this model uses {config._attn_implementation!r}")
    for config in configs.values():
        config._attn_implementation = TREE_ATTENTION
