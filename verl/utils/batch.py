"""Pack prompt / response token lists into the padded tensors the workers expect."""

from __future__ import annotations

import torch

from verl.protocol import DataProto
from verl.utils.torch_functional import position_ids_from_mask


def pack_sequences(
    prompts: list[list[int]],
    responses: list[list[int]],
    response_masks: list[list[int]] | None = None,
    pad_id: int = 0,
    prompt_width: int | None = None,
    response_width: int | None = None,
) -> dict[str, torch.Tensor]:
    """Left-pad prompts to P, right-pad responses to T, and build the masks.

    Returns ``prompts (B,P)``, ``responses (B,T)``, ``input_ids (B,P+T)``,
    ``attention_mask``, ``position_ids`` and ``response_mask (B,T)`` (1 on every
    response token unless ``response_masks`` says otherwise).
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    P = prompt_width or max(len(p) for p in prompts)
    T = response_width or max(max((len(r) for r in responses), default=1), 1)
    B = len(prompts)
    prompt_t = torch.full((B, P), pad_id, dtype=torch.long)
    resp_t = torch.full((B, T), pad_id, dtype=torch.long)
    prompt_m = torch.zeros((B, P), dtype=torch.long)
    resp_m = torch.zeros((B, T), dtype=torch.long)
    loss_m = torch.zeros((B, T), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        if len(p) > P or len(r) > T:
            raise ValueError(f"row {i}: prompt {len(p)} / response {len(r)} tokens exceed widths {P} / {T}")
        if len(p) == 0:
            raise ValueError(f"row {i}: empty prompt")
        prompt_t[i, P - len(p) :] = torch.tensor(p)
        prompt_m[i, P - len(p) :] = 1
        if r:
            resp_t[i, : len(r)] = torch.tensor(r)
            resp_m[i, : len(r)] = 1
            loss_m[i, : len(r)] = torch.tensor(response_masks[i]) if response_masks else 1
    attention_mask = torch.cat([prompt_m, resp_m], dim=1)
    return {
        "prompts": prompt_t,
        "responses": resp_t,
        "input_ids": torch.cat([prompt_t, resp_t], dim=1),
        "attention_mask": attention_mask,
        "position_ids": position_ids_from_mask(attention_mask),
        "response_mask": loss_m,
    }


def packed_proto(prompts: list[list[int]], responses: list[list[int]], **kwargs) -> DataProto:
    """`pack_sequences` as a DataProto."""
    return DataProto.from_dict(pack_sequences(prompts, responses, **kwargs))


PROMPT_KEYS = ("prompts",)  # (B, P): left-padded
SEQUENCE_KEYS = ("input_ids", "attention_mask", "position_ids")  # (B, P + T): prompt part, then response part


def concat_padded(parts: list[DataProto], pad_id: int) -> DataProto:
    """Concatenate rollout batches whose prompt width P and response width T differ.

    Each part is re-padded to the widest P (on the left) and T (on the right):
    ``prompts`` with ``pad_id``, the ``input_ids`` / ``attention_mask`` halves
    likewise (0 for the mask), every other ``(B, T)`` tensor on the right
    (``responses`` with ``pad_id``, the rest with 0); ``position_ids`` are
    rebuilt from the mask. ``(B,)`` tensors and non-tensors are untouched.
    """
    P = max(p.batch["prompts"].shape[1] for p in parts)
    T = max(p.batch["responses"].shape[1] for p in parts)
    padded = []
    for part in parts:
        p_w, t_w = part.batch["prompts"].shape[1], part.batch["responses"].shape[1]
        batch = {}
        for key, value in part.batch.items():
            fill = pad_id if key in ("prompts", "responses", "input_ids") else 0
            if value.dim() < 2:
                batch[key] = value
            elif key in PROMPT_KEYS:
                batch[key] = torch.nn.functional.pad(value, (P - p_w, 0), value=fill)
            elif key in SEQUENCE_KEYS:
                head = torch.nn.functional.pad(value[:, :p_w], (P - p_w, 0), value=fill)
                batch[key] = torch.cat([head, torch.nn.functional.pad(value[:, p_w:], (0, T - t_w), value=fill)], dim=1)
            else:
                batch[key] = torch.nn.functional.pad(value, (0, T - t_w), value=fill)
        if "position_ids" in batch:
            batch["position_ids"] = position_ids_from_mask(batch["attention_mask"])
        padded.append(DataProto(batch=batch, non_tensor_batch=part.non_tensor_batch, meta_info=part.meta_info))
    return DataProto.concat(padded)
