"""Turn finished trajectories into the training `DataProto`, its metrics and the readable records.

Batch (B = trajectories, rows of one group adjacent; P, T = the batch's
widest prompt and response):

* ``prompts (B,P)`` left-padded, ``responses (B,T)`` right-padded,
  ``input_ids = cat(prompts, responses)``, ``attention_mask`` (1 on every real
  token), ``position_ids`` (`verl.utils.batch.pack_sequences`);
* ``response_mask (B,T)``: 1 on sampled model tokens only; all 0 on a failed row;
* ``rollout_log_probs (B,T)`` float: the engine's log-prob of each sampled
  token, 0 elsewhere and on failed rows.

Non-tensors say what happened; the trainer's reward path
(`verl.trainer.ppo.reward`) turns them into scores: ``uid``, ``data_source``,
``task_id``, ``trajectory`` (readable turns), ``num_turns``, ``success``,
``env_reward``, ``reward_total`` and ``reward_breakdown`` (the composed episode
reward and its components), ``turn_ends`` (each model turn's last model-token
index), ``failed``, ``status``, ``error``, ``seed``, ``env_server``, and every
column of the dataset row the trajectory came from (``reward_model``,
``extra_info``, ``prompt`` ...). Failed rows are excluded from the reward,
success and turn means. Step-wise mode (`build_batch(step_wise=True)`) has one
row per model turn instead.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from openmanus_rl.envs.specs import EnvSpec
from openmanus_rl.rewards import EpisodeOutcome, RewardComposer
from verl.protocol import DataProto
from verl.utils.batch import pack_sequences

from .chat import ChatFormat
from .trajectory import Trajectory

Specs = Mapping[str, EnvSpec]  # env name -> spec: the envs a rollout ran, found by `Trajectory.env_name`


def score(
    trajectories: list[Trajectory], composers: Mapping[str, RewardComposer], specs: Specs
) -> list[tuple[float, dict[str, float]]]:
    """``(total, breakdown)`` per trajectory, by its env's composer; a failed one gets ``(0.0, {name: 0.0})``
    and is never averaged in."""
    out = []
    for t in trajectories:
        composer, spec = composers[t.env_name], specs[t.env_name]
        if t.failed:
            out.append((0.0, {name: 0.0 for name in composer.names}))
            continue
        outcome = EpisodeOutcome(
            spec.name, t.env_reward, success(t, spec), spec.reward_scale, t.model_tokens, tuple(t.model_texts)
        )
        out.append(composer(outcome))
    return out


def success(t: Trajectory, spec: EnvSpec) -> bool:
    return not t.failed and t.env_reward >= spec.success_reward


def objects(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        arr[i] = value
    return arr


def build_batch(
    trajectories: list[Trajectory],
    scores: list[tuple[float, dict[str, float]]],
    specs: Specs,
    pad_id: int,
    dataset_columns: dict[str, np.ndarray],
    composers: Mapping[str, RewardComposer] | None = None,
    step_wise: bool = False,
) -> DataProto:
    """The training `DataProto` (batch and non-tensors; no meta_info).

    One row per trajectory; per row, one entry per model turn (empty for a failed trajectory): ``turn_ends``
    (the turn's last token in the response), ``anchor_obs`` (the state it acted on, `turn_anchors`) and, with
    ``composers``, ``step_reward`` (what it earned on the way, `_paid_per_turn`): GiGPO's per-turn inputs.

    ``step_wise``: one row per model turn instead, its generation context as the prompt and the turn as the
    response. Each row repeats its trajectory's non-tensors (``reward_total`` too: the reward path pays each
    row the trajectory's reward) and adds ``traj_uid``, ``step`` and its turn's ``anchor_obs`` and
    ``step_reward`` (0 for a failed trajectory); no ``turn_ends``.
    """
    if step_wise:
        rows = [(b, k) for b, t in enumerate(trajectories) for k in range(len(t.turn_spans))]
        if not rows:
            raise RuntimeError("step-wise rollout produced no turn: every episode failed before its first generation")
    else:
        rows = [(b, None) for b in range(len(trajectories))]
    prompts, responses, masks, log_probs = [], [], [], []
    for b, k in rows:
        t = trajectories[b]
        start, end = (0, len(t.response_ids)) if k is None else t.turn_spans[k]
        prompts.append(t.prompt_ids + (t.response_ids[t.windows[k] : start] if step_wise else []))
        responses.append(t.response_ids[start:end])
        masks.append([0] * (end - start) if t.failed else t.response_mask[start:end])
        log_probs.append([] if t.failed else t.log_probs[start:end])
    tensors = pack_sequences(prompts, responses, response_masks=masks, pad_id=pad_id)
    tensors["rollout_log_probs"] = torch.zeros(tensors["responses"].shape, dtype=torch.float32)
    for i, (lps, mask) in enumerate(zip(log_probs, masks)):
        if lps:
            tensors["rollout_log_probs"][i, : len(lps)] = torch.tensor(lps, dtype=torch.float32) * torch.tensor(mask)
    non_tensors = build_non_tensors(trajectories, scores, specs, dataset_columns)
    kept = [step_wise or not t.failed for t in trajectories]  # a failed trajectory's row: empty per-turn lists
    per_turn = {"anchor_obs": [turn_anchors(t) if keep else [] for t, keep in zip(trajectories, kept)]}
    if composers is not None:
        per_turn["step_reward"] = [
            _paid_per_turn(t, composers[t.env_name], specs[t.env_name]) if keep else []
            for t, keep in zip(trajectories, kept)
        ]
    if not step_wise:
        non_tensors["turn_ends"] = objects([list(t.turn_ends) if keep else [] for t, keep in zip(trajectories, kept)])
        return DataProto.from_dict(tensors, {**non_tensors, **{key: objects(v) for key, v in per_turn.items()}})
    non_tensors = {key: objects([values[b] for b, _ in rows]) for key, values in non_tensors.items()}
    non_tensors["traj_uid"] = objects([f"{trajectories[b].uid}/{trajectories[b].copy}" for b, _ in rows])
    non_tensors["step"] = objects([k for _, k in rows])
    for key, values in per_turn.items():
        non_tensors[key] = objects([values[b][k] for b, k in rows])
    return DataProto.from_dict(tensors, non_tensors)


def build_non_tensors(
    trajectories: list[Trajectory],
    scores: list[tuple[float, dict[str, float]]],
    specs: Specs,
    dataset_columns: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """The per-trajectory non-tensor columns, then the dataset row's columns that the rollout did not set."""
    own = {
        "uid": objects([t.uid for t in trajectories]),
        "data_source": objects([t.data_source for t in trajectories]),
        "task_id": objects([t.task_id for t in trajectories]),
        "trajectory": objects([t.turns for t in trajectories]),
        "num_turns": objects([t.num_turns for t in trajectories]),
        "success": objects([success(t, specs[t.env_name]) for t in trajectories]),
        "env_reward": objects([float(t.env_reward) for t in trajectories]),
        "reward_total": objects([0.0 if t.failed else float(total) for t, (total, _) in zip(trajectories, scores)]),
        "reward_breakdown": objects([breakdown for _, breakdown in scores]),
        "failed": objects([t.failed for t in trajectories]),
        "status": objects([t.status for t in trajectories]),
        "error": objects([t.error for t in trajectories]),
        "seed": objects([t.seed for t in trajectories]),
        "env_server": objects([t.server for t in trajectories]),
    }
    carried = {
        key: objects([values[t.row] for t in trajectories]) for key, values in dataset_columns.items() if key not in own
    }
    return {**own, **carried}


def normalize_observation(text: str) -> str:
    """An env observation as a state key: lower-cased, whitespace runs collapsed to one space, stripped."""
    return " ".join(text.lower().split())


def turn_anchors(t: Trajectory) -> list[str]:
    """The state each model turn of ``t`` acted on: `normalize_observation` of the last env observation before it
    in ``t.turns`` (the reset observation for the first turn; the agent's invalid-action feedback is skipped, the
    state did not change)."""
    state, per_turn = "", []
    for entry in t.turns:
        if entry["role"] == "observation" and not entry.get("feedback", False):
            state = normalize_observation(entry["text"])
        elif entry["role"] == "assistant":
            per_turn.append(state)
    if len(per_turn) < len(t.turn_spans):
        raise RuntimeError(
            f"trajectory {t.uid}/{t.copy} records {len(per_turn)} assistant turns "
            f"but has {len(t.turn_spans)} model turns"
        )
    return per_turn[: len(t.turn_spans)]


def _paid_per_turn(t: Trajectory, composer: RewardComposer, spec: EnvSpec) -> list[float]:
    """Each model turn's share of ``t``'s total earned on the way (see `build_batch`)."""
    if t.failed:
        return [0.0] * len(t.turn_spans)
    running, reward = [], 0.0
    for entry in t.turns:
        if entry["role"] == "assistant":
            reward = float(entry.get("reward", reward))
            running.append(reward)
    return composer.paid_per_turn(running[: len(t.turn_spans)], spec.reward_scale)


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def rollout_metrics(
    trajectories: list[Trajectory], scores: list[tuple[float, dict[str, float]]], specs: Specs, start_errors: int
) -> dict[str, float]:
    """Flat float metrics; means are over trajectories that did not fail.

    ``env/errors`` counts env calls that failed after their retries: ``start_errors``
    (while starting episodes, including those the pool recovered from by failing
    over) plus one per trajectory that failed after its episode started.  When the
    trajectories come from more than one data source, each source also gets
    ``env/<source>/{success_rate, reward/mean, turns/mean, trajectories, failed_trajectories}``
    and ``reward/<source>/total/mean``.
    """
    ok = [(t, s) for t, s in zip(trajectories, scores) if not t.failed]
    failed = sum(t.failed for t in trajectories)
    turns = sum(t.num_turns for t in trajectories)
    invalid = sum(t.invalid_actions for t in trajectories)
    metrics = {
        "env/success_rate": _mean([float(success(t, specs[t.env_name])) for t, _ in ok]),
        "env/reward/mean": _mean([t.env_reward for t, _ in ok]),
        "env/turns/mean": _mean([float(t.num_turns) for t, _ in ok]),
        "env/invalid_actions": float(invalid),
        "env/invalid_action_rate": invalid / turns if turns else 0.0,
        "env/errors": float(start_errors + sum(t.failed and bool(t.server) for t in trajectories)),
        "env/failed_trajectories": float(failed),
        "env/done_trajectories": float(sum(t.status == "done" for t in trajectories)),
        "env/turn_limit_trajectories": float(sum(t.status == "turn_limit" for t in trajectories)),
        "env/truncated_observations": float(sum(t.truncated_observations for t in trajectories)),
        "reward/total/mean": _mean([total for _, (total, _) in ok]),
        "rollout/trajectories": float(len(trajectories)),
        "rollout/generated_tokens": float(sum(t.model_tokens for t in trajectories)),
        "rollout/truncated_trajectories": float(sum(t.status == "truncated" for t in trajectories)),
        "rollout/response_length/mean": _mean([float(len(t.response_ids)) for t in trajectories]),
    }
    names = list(scores[0][1]) if scores else []
    for name in names:
        metrics[f"reward/{name}/mean"] = _mean([breakdown[name] for _, (_, breakdown) in ok])
    sources = sorted({t.data_source for t in trajectories})
    if len(sources) > 1:
        for source in sources:
            mine = [(t, total) for t, (total, _) in ok if t.data_source == source]
            metrics.update(
                {
                    f"env/{source}/success_rate": _mean([float(success(t, specs[t.env_name])) for t, _ in mine]),
                    f"env/{source}/reward/mean": _mean([t.env_reward for t, _ in mine]),
                    f"env/{source}/turns/mean": _mean([float(t.num_turns) for t, _ in mine]),
                    f"env/{source}/trajectories": float(sum(t.data_source == source for t in trajectories)),
                    f"env/{source}/failed_trajectories": float(
                        sum(t.failed and t.data_source == source for t in trajectories)
                    ),
                    f"reward/{source}/total/mean": _mean([total for _, total in mine]),
                }
            )
    return metrics


def trajectory_record(
    t: Trajectory, chat: ChatFormat, scored: tuple[float, dict[str, float]], spec: EnvSpec, global_step: int
) -> dict[str, Any]:
    """A JSON-ready record of one trajectory (played on ``spec``'s env) for the JSONL files and the viewer."""
    total, breakdown = scored
    return {
        "global_step": global_step,
        "uid": t.uid,
        "task_id": t.task_id,
        "copy": t.copy,
        "data_source": t.data_source,
        "env": t.env_name,
        "seed": t.seed,
        "server": t.server,
        "status": t.status,
        "failed": t.failed,
        "error": t.error,
        "success": success(t, spec),
        "env_reward": t.env_reward,
        "reward_total": total,
        "reward_breakdown": breakdown,
        "num_turns": t.num_turns,
        "invalid_actions": t.invalid_actions,
        "prompt_tokens": len(t.prompt_ids),
        "prompt_text": chat.tokenizer.decode(t.prompt_ids),
        "turns": t.turns,
        "segments": [
            {
                "kind": s.kind,
                "text": chat.tokenizer.decode(t.response_ids[s.start : s.end]),
                "tokens": s.end - s.start,
                "mask": 0 if t.failed else int(s.kind == "model"),
            }
            for s in t.segments
        ],
    }
