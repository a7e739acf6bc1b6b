"""The demonstrations ``scripts/make_sft_data.py`` writes, for the tests that make them and read them back."""

from __future__ import annotations

from pathlib import Path


def sft_argv(server: str, out: Path, *args: str) -> list[str]:
    """``make_sft_data``'s arguments: ``args``, then the episodes played against the WebShop ``server``, every one
    kept, written to ``out`` in the ids of the SmolLM2 tokenizer."""
    from model_prep import prepare_tokenizer

    return [*args, "--out", str(out), "--server_url", server, "--keep", "all", "--tokenizer", str(prepare_tokenizer())]


def loss_spans(ids: list[int], loss_mask: list[int]) -> list[list[int]]:
    """The runs of ``ids`` under a loss mask of 1, in order: the replies a demonstration trains on."""
    spans, current = [], []
    for token, m in zip(ids, loss_mask):
        if m:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    return spans
