"""The one reward path: every score used by training, validation and the ReMax baseline comes from here.

A rollout (the multi-turn agent, or the single-turn generator) reports what
happened, per row: the dataset's columns (``data_source``, ``reward_model``,
``extra_info`` ...) and, for agent episodes, ``env_reward``, ``success``,
``num_turns``, ``reward_breakdown``, ``reward_total`` (the agent's composed
episode reward) and ``turn_ends`` (the last model token of each turn).
`RewardManager` turns that into scores:

1. ``R`` = the reward module the row's ``reward_score_fn`` column names (a rollout
   that decided the reward itself says so there), else the one chosen by name
   (``algorithm.reward_score_fn``) or by the row's ``data_source``
   (`verl.utils.reward_score`), called as
   ``compute_score(data_source, solution_str, ground_truth, extra_info)``
   with a time limit. A module that raises or runs past the limit marks the
   row failed (the error recorded); it is never scored 0 as if played.
2. ``outcome_scores[b] = R`` (B,): the trajectory's score, whatever the
   allocation; in step-wise mode every row of a trajectory carries its R.
3. ``token_level_scores`` (B, T) = R placed on model tokens by the allocation
   (`allocate`): token-level credit for GAE and REINFORCE++.

Failed rows (env errors, reward errors) get R = 0, all-zero scores and an
all-zero ``response_mask``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto
from verl.utils.reward_score import get_reward_score_fn

ALLOCATIONS = ("last_token", "uniform_positive", "discounted")
TRAJECTORY_FACTS = ("task_id", "env_reward", "success", "num_turns", "reward_breakdown", "reward_total")


def allocate(
    strategy: str,
    rewards: list[float],
    response_masks: list[list[int]],
    turn_ends: list[list[int]],
    width: int,
    gamma: float = 1.0,
) -> torch.Tensor:
    """``(B, width)`` float32 scores: each row's reward ``R`` put on its model tokens.

    With ``M`` the row's model tokens and ``e_0 < ... < e_{K-1}`` the last
    model token of each of its ``K`` turns (``turn_ends[b]``):
    ``last_token``: ``s[e_{K-1}] = R``; ``uniform_positive``: ``s[i] = R / M``
    on every model token when ``R > 0``, else as ``last_token``;
    ``discounted``: ``s[e_k] = gamma ** (K - 1 - k) * R``. A row without
    model tokens stays all zero.
    """
    if strategy not in ALLOCATIONS:
        raise ValueError(f"unknown reward allocation {strategy!r}; choose one of {list(ALLOCATIONS)}")
    scores = torch.zeros((len(rewards), width), dtype=torch.float32)
    for b, (reward, mask, ends) in enumerate(zip(rewards, response_masks, turn_ends)):
        model = [i for i, m in enumerate(mask) if m]
        if not model:
            continue
        if strategy == "uniform_positive" and reward > 0:
            scores[b, model] = reward / len(model)
        elif strategy == "discounted" and ends:
            for k, end in enumerate(ends):
                scores[b, end] = gamma ** (len(ends) - 1 - k) * reward
        else:
            scores[b, model[-1]] = reward
    return scores


class RewardError(RuntimeError):
    """A reward module raised or ran past its time limit."""


def _call_with_timeout(fn, args: tuple, timeout_s: float) -> Any:
    """``fn(*args)`` on a daemon thread; `RewardError` when it raises or is still running after ``timeout_s``.

    A hung call cannot be killed from Python: its thread is left behind (daemon) and the row is failed.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller as the row's error
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="reward-fn")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise RewardError(f"timed out after {timeout_s:g} s")
    if "error" in box:
        exc = box["error"]
        raise RewardError(f"{type(exc).__name__}: {exc}")
    return box["value"]


def _as_dict(value: Any) -> dict:
    if isinstance(value, str):
        value = json.loads(value) if value else {}
    return dict(value) if isinstance(value, Mapping) else {}


def _plain(value: Any) -> Any:
    """numpy containers from parquet (arrays of numbers or dicts) as plain Python values."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def mark_failed(batch: DataProto, rows: list[int], error: str) -> None:
    """Mark ``rows`` failed: ``failed``, status ``failed``, ``error`` (where those columns exist), no model token
    (response mask 0), so they join no group, loss or metric."""
    nt = batch.non_tensor_batch
    for i in rows:
        nt["failed"][i] = True
        if "status" in nt:
            nt["status"][i] = "failed"
        if "error" in nt:
            nt["error"][i] = error
    batch.batch["response_mask"][rows] = 0


@dataclass(eq=False)
class RewardManager:
    """Scores a batch as the module docstring says: ``tokenizer`` decodes the model's text, ``reward_score_fn``
    names the reward module (None: the row's data source's), ``allocation`` (one of `ALLOCATIONS`) and ``gamma``
    place R on the tokens, and each call of a module has ``timeout_s`` seconds."""

    tokenizer: Any
    reward_score_fn: str | None = None
    allocation: str = "last_token"
    gamma: float = 1.0
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.allocation not in ALLOCATIONS:
            raise ValueError(f"unknown reward allocation {self.allocation!r}; choose one of {list(ALLOCATIONS)}")

    def final_model_text(self, batch: DataProto, row: int) -> str:
        """Decoded text of the last contiguous run of model tokens."""
        mask = batch.batch["response_mask"][row].tolist()
        ids = batch.batch["responses"][row].tolist()
        end = max((i for i, m in enumerate(mask) if m), default=-1)
        if end < 0:
            return ""
        start = end
        while start > 0 and mask[start - 1]:
            start -= 1
        return self.tokenizer.decode(ids[start : end + 1], skip_special_tokens=True)

    def _extra_info(self, nt: dict, row: int) -> dict:
        extra = _plain(_as_dict(nt["extra_info"][row])) if "extra_info" in nt else {}
        for key in TRAJECTORY_FACTS:
            if key in nt and nt[key][row] is not None:
                extra[key] = _plain(nt[key][row])
        return extra

    def _fn(self, nt: dict, row: int) -> tuple[str, Any]:
        """The row's reward module: its ``reward_score_fn`` column when set, else ours or its data source's."""
        own = nt["reward_score_fn"][row] if "reward_score_fn" in nt else None
        return get_reward_score_fn(own or self.reward_score_fn, str(nt["data_source"][row]))

    def _score_row(self, batch: DataProto, row: int) -> tuple[str, float, dict]:
        nt = batch.non_tensor_batch
        source = str(nt["data_source"][row])
        name, fn = self._fn(nt, row)
        reward_model = _plain(_as_dict(nt["reward_model"][row])) if "reward_model" in nt else {}
        args = (source, self.final_model_text(batch, row), reward_model.get("ground_truth"), self._extra_info(nt, row))
        result = _call_with_timeout(fn, args, self.timeout_s)
        details = dict(result) if isinstance(result, Mapping) else {"score": result}
        if "score" not in details:
            raise RewardError(f"returned a dict without 'score': {sorted(details)}")
        return name, float(details.pop("score")), details

    def __call__(self, batch: DataProto) -> dict[str, float]:
        """Write ``outcome_scores`` and ``token_level_scores``; returns ``reward/*`` metrics."""
        nt = batch.non_tensor_batch
        n = len(batch)
        for key, default in (("failed", False), ("success", None), ("error", "")):
            if key not in nt:
                nt[key] = np.array([default] * n, dtype=object)
        rewards = [0.0] * n
        per_fn: dict[str, list[float]] = {}
        details: dict[str, list[float]] = {}
        errors = 0
        for i in range(n):
            if bool(nt["failed"][i]):
                continue
            try:
                name, rewards[i], extra = self._score_row(batch, i)
            except RewardError as exc:
                name, _ = self._fn(nt, i)
                mark_failed(batch, [i], f"reward '{name}' failed: {exc}")
                errors += 1
                continue
            per_fn.setdefault(name, []).append(rewards[i])
            if nt["success"][i] is None:  # no env verdict (single-turn rows): full marks count as success
                nt["success"][i] = bool(extra.get("success", rewards[i] >= 1.0))
            for key, value in extra.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    details.setdefault(f"reward/{name}/{key}/mean", []).append(float(value))
        self.place(batch, rewards)
        metrics = {f"reward/{name}/mean": float(np.mean(v)) for name, v in per_fn.items()}
        metrics.update({key: float(np.mean(v)) for key, v in details.items()})
        metrics["reward/errors"] = float(errors)
        return metrics

    def place(self, batch: DataProto, rewards: list[float]) -> None:
        """Write ``outcome_scores`` = ``rewards`` and ``token_level_scores``: each reward on its row's model tokens
        by the allocation (step-wise rows: row k of K carries ``gamma^(K-1-k) R`` under discounted)."""
        nt = batch.non_tensor_batch
        n = len(batch)
        masks = batch.batch["response_mask"].tolist()
        width = batch.batch["responses"].shape[1]
        if "step" in nt:
            placed = [
                r
                * (
                    self.gamma ** (int(nt["num_turns"][i]) - 1 - int(nt["step"][i]))
                    if self.allocation == "discounted"
                    else 1.0
                )
                for i, r in enumerate(rewards)
            ]
            within_row = "last_token" if self.allocation == "discounted" else self.allocation
            scores = allocate(within_row, placed, masks, [[]] * n, width, self.gamma)
        else:
            ends = [list(nt["turn_ends"][i]) for i in range(n)] if "turn_ends" in nt else [[]] * n
            scores = allocate(self.allocation, rewards, masks, ends, width, self.gamma)
        batch.batch["token_level_scores"] = scores
        batch.batch["outcome_scores"] = torch.tensor(rewards, dtype=torch.float32)
