"""Finished episodes to the training `DataProto`, its metrics and the readable records.

One row per sample (an episode with prefix breaks has several; `Session`), rows of an episode and
of a task's group adjacent.  Tensors as the built-in agent's (`openmanus_rl.agent.output`):
``prompts`` (a sample's first prompt), ``responses`` (everything after it), ``input_ids``,
``attention_mask``, ``position_ids``, ``response_mask`` (1 exactly on sampled ids; all 0 on a
failed row) and ``rollout_log_probs`` (the engine's, 0 elsewhere).  A failed episode without any
sample gets one row whose prompt is the end-of-turn token.

Non-tensors: ``uid`` (the task's group), ``task_id``, ``data_source``, ``failed``, ``status``
("done", "truncated": a call hit the token budget, or "failed"), ``error``, ``seed`` (the first
call's), ``num_turns`` (calls in the sample), ``turn_ends``, ``reward_total`` (the episode's reward,
shared by its samples), ``reward_score_fn`` (``"episode"``: the reward path takes ``reward_total``),
``success`` (the program's ``info["success"]`` when a bool, else ``reward_total >= 1``; False on a
failed row), ``scored_by``
(``"program"`` or the reward module that scored it), ``program_info``, ``sample``,
``prefix_breaks``, ``gateway_session``, then every dataset column of the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from openmanus_rl.agent.output import objects
from verl.protocol import DataProto
from verl.utils.batch import pack_sequences
from verl.utils.prefix_tree import tree_size

from .episodes import Outcome
from .session import Sample, Session, call_seed

NO_CALL = "the program made no model call"


@dataclass
class Episode:
    row: int
    copy: int
    uid: str
    task_id: Any
    task: dict[str, Any]
    session: Session
    base_url: str

    def failure(self, outcome: Outcome) -> str:
        """The episode's error ("" when it did not fail)."""
        return outcome.error or ("" if self.session.samples else NO_CALL)

    def status(self, outcome: Outcome) -> str:
        return "failed" if self.failure(outcome) else "truncated" if self.session.truncated else "done"


def build_batch(
    episodes: list[Episode], outcomes: list[Outcome], dataset_columns: dict[str, np.ndarray], pad_id: int, eot_id: int
) -> DataProto:
    rows: list[tuple[Episode, Outcome, int, Sample]] = []
    for e, o in zip(episodes, outcomes):
        samples = e.session.samples or [Sample([eot_id])]
        rows += [(e, o, k, sample) for k, sample in enumerate(samples)]
    failed = [bool(e.failure(o)) for e, o, _, _ in rows]
    masks = [[0] * len(s.response_ids) if f else s.response_mask for (_, _, _, s), f in zip(rows, failed)]
    tensors = pack_sequences(
        [s.prompt_ids for *_, s in rows], [s.response_ids for *_, s in rows], response_masks=masks, pad_id=pad_id
    )
    log_probs = torch.zeros(tensors["responses"].shape, dtype=torch.float32)
    for b, ((*_, s), mask) in enumerate(zip(rows, masks)):
        if s.log_probs:
            log_probs[b, : len(s.log_probs)] = torch.tensor(s.log_probs, dtype=torch.float32) * torch.tensor(mask)
    tensors["rollout_log_probs"] = log_probs
    success = [said if isinstance(said := o.info.get("success"), bool) else o.reward >= 1.0 for _, o, _, _ in rows]
    own = {
        "uid": [e.uid for e, *_ in rows],
        "task_id": [e.task_id for e, *_ in rows],
        "data_source": [str(e.task.get("data_source", "gateway")) for e, *_ in rows],
        "failed": failed,
        "status": [e.status(o) for e, o, _, _ in rows],
        "error": [e.failure(o) for e, o, _, _ in rows],
        "seed": [call_seed(e.session.seed_key, 0) for e, *_ in rows],
        "num_turns": [sum(c.sample == k for c in e.session.calls) for e, _, k, _ in rows],
        "turn_ends": [[] if f else list(s.turn_ends) for (*_, s), f in zip(rows, failed)],
        "reward_total": [0.0 if f else o.reward for (_, o, _, _), f in zip(rows, failed)],
        "reward_score_fn": ["episode"] * len(rows),
        "success": [value and not f for value, f in zip(success, failed)],
        "scored_by": [o.scored_by for _, o, _, _ in rows],
        "program_info": [o.info for _, o, _, _ in rows],
        "sample": [k for _, _, k, _ in rows],
        "prefix_breaks": [e.session.prefix_breaks for e, *_ in rows],
        "gateway_session": [e.session.id for e, *_ in rows],
    }
    non_tensors = {key: objects(values) for key, values in own.items()}
    for key, values in dataset_columns.items():
        if key not in non_tensors:
            non_tensors[key] = objects([values[e.row] for e, *_ in rows])
    return DataProto.from_dict(tensors, non_tensors)


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def rollout_metrics(episodes: list[Episode], outcomes: list[Outcome], batch: DataProto) -> dict[str, float]:
    """``gateway/*`` counts (episodes, calls, samples, prefix breaks, failed / timed-out / truncated episodes,
    episodes scored by a reward module) and means over episodes that did not fail, plus ``rollout/*``.

    What a rewritten history costs: an episode whose program rewrites its conversation (a sliding window, a summary)
    becomes several samples, each run through the training passes whole.  Per episode, ``sample_tokens`` is the sum of
    its samples' tokens (what the flat path runs) and ``tree_tokens`` the tokens of the prefix tree over them (what
    tree packing runs when they share a micro-batch: the common system text and window once)."""
    ok = [(e, o) for e, o in zip(episodes, outcomes) if not e.failure(o)]
    sequences = [[np.asarray(s.sequence) for s in e.session.samples] for e, _ in ok]
    mask = batch.batch["response_mask"]
    return {
        "gateway/episodes": float(len(episodes)),
        "gateway/calls": float(sum(len(e.session.calls) for e in episodes)),
        "gateway/samples": float(len(batch)),
        "gateway/prefix_breaks": float(sum(e.session.prefix_breaks for e in episodes)),
        "gateway/failed_episodes": float(len(episodes) - len(ok)),
        "gateway/timed_out_episodes": float(sum(o.timed_out for o in outcomes)),
        "gateway/truncated_episodes": float(sum(e.status(o) == "truncated" for e, o in zip(episodes, outcomes))),
        "gateway/registry_scored": float(sum(o.scored_by not in ("", "program") for _, o in ok)),
        "gateway/reward/mean": _mean([o.reward for _, o in ok]),
        "gateway/calls/mean": _mean([float(len(e.session.calls)) for e, _ in ok]),
        "gateway/samples/mean": _mean([float(len(rows)) for rows in sequences]),
        "gateway/sample_tokens/mean": _mean([float(sum(len(r) for r in rows)) for rows in sequences]),
        "gateway/tree_tokens/mean": _mean([float(tree_size(rows)) for rows in sequences]),
        "rollout/trajectories": float(len(episodes)),
        "rollout/generated_tokens": float(mask.sum()),
        "rollout/response_length/mean": float(
            batch.batch["attention_mask"][:, -mask.shape[1] :].sum(-1).float().mean()
        ),
    }


def episode_record(e: Episode, o: Outcome, renderer: Any, global_step: int) -> dict[str, Any]:
    """A JSON-ready record of one episode: what happened, and each call's prompt size and reply."""
    return {
        "global_step": global_step,
        "uid": e.uid,
        "task_id": e.task_id,
        "copy": e.copy,
        "session": e.session.id,
        "status": e.status(o),
        "error": e.failure(o),
        "reward": o.reward,
        "scored_by": o.scored_by,
        "info": o.info,
        "samples": len(e.session.samples),
        "prefix_breaks": e.session.prefix_breaks,
        "calls": [
            {
                "sample": c.sample,
                "prompt_tokens": len(c.prompt_ids),
                "reply_tokens": len(c.response_ids),
                "reply": renderer.tokenizer.decode(c.response_ids),
                "finish_reason": c.finish_reason,
                "seed": c.seed,
                "content": c.content,
                "tool_calls": c.tool_calls,
            }
            for c in e.session.calls
        ],
    }
