"""The decisions of one step, made once in the driver from the config and the batch, that the workers then obey;
and what each worker call carries.

`plan_step` answers, for a batch of ``rows`` rows about to train:

* ``old_log_probs_from_update``: the update itself supplies the old log-probs (`PPOActor.update_policy`) and the
  separate pass is skipped. True when ``actor.reuse_on_policy_log_prob`` is on, the batch makes one optimiser step
  (one epoch of one mini-batch), and nothing needs them before the update (an in-reward KL penalty would). Each
  token's old log-prob is then its current one, detached: the ratio is 1 and nothing clips.
* ``keep_values_forward``: the critic may keep its values forward for its update (``critic.reuse_values_forward``,
  one optimiser step of the critic); the critic still declines where its memory would not allow it
  (`PPOCritic.compute_values`).
* ``actor_inputs``: the batch keys the actor's update reads beyond `MODEL_INPUTS`.

`prepare_for_update` makes the rolled-out batch trainable: padded to whole mini-batches (step-wise rows vary in
number), carrying the sampling distribution its log-probs are recomputed under, and balanced over the ranks.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from verl import batch_keys as K
from verl.protocol import DataProto
from verl.trainer.ppo.config import PPOConfig
from verl.workers.rollout.base import Sampling

MODEL_INPUTS = (K.INPUT_IDS, K.ATTENTION_MASK, K.POSITION_IDS, K.RESPONSES, K.RESPONSE_MASK)  # every model pass
SAMPLING_META = tuple(f.name for f in dataclasses.fields(Sampling))  # the distribution log-probs are recomputed under


@dataclasses.dataclass(frozen=True)
class StepPlan:
    old_log_probs_from_update: bool
    keep_values_forward: bool
    actor_inputs: tuple[str, ...]


def plan_step(cfg: PPOConfig, rows: int, has_rollout_log_probs: bool) -> StepPlan:
    """The plan for ``rows`` rows (after padding); ``has_rollout_log_probs``: the engine's log-probs are in the
    batch (the update then reports the engine-vs-trainer gap itself, or corrects for staleness with them)."""
    actor, critic = cfg.actor_rollout_ref.actor, cfg.critic
    from_update = (
        actor.reuse_on_policy_log_prob
        and actor.ppo_epochs == 1
        and rows == actor.ppo_mini_batch_size
        and not cfg.algorithm.use_kl_in_reward
    )
    inputs = [K.ADVANTAGES, *([] if from_update else [K.OLD_LOG_PROBS])]
    if actor.use_kl_loss:
        inputs.append(K.REF_LOG_PROB)
    if actor.tis_cap is not None or (from_update and has_rollout_log_probs):
        inputs.append(K.ROLLOUT_LOG_PROBS)
    keep_values = (
        cfg.use_critic and critic.reuse_values_forward and critic.ppo_epochs == 1 and rows == critic.ppo_mini_batch_size
    )
    return StepPlan(from_update, keep_values, tuple(inputs))


def for_worker(batch: DataProto, *extra: str) -> DataProto:
    """What a worker call reads, and nothing else: the model inputs, ``extra`` tensors and the sampling settings."""
    meta = [k for k in SAMPLING_META if k in batch.meta_info]
    return batch.select(batch_keys=[*MODEL_INPUTS, *extra], non_tensor_batch_keys=[], meta_info_keys=meta)


def prepare_for_update(batch: DataProto, cfg: PPOConfig) -> DataProto:
    """`pad_to_mini_batches`, the rollout's sampling settings in ``meta_info``, then `balance` over the ranks."""
    batch = pad_to_mini_batches(batch, cfg)
    batch.meta_info.update(dataclasses.asdict(cfg.actor_rollout_ref.rollout.sampling))
    if cfg.trainer.balance_batch:
        balance(batch, cfg.world_size)
    return batch


def pad_to_mini_batches(batch: DataProto, cfg: PPOConfig) -> DataProto:
    """Step-wise rows (one per turn) vary in number: pad to a multiple of the mini-batch sizes and ranks
    with copies of row 0 that have no model token and are marked failed, so they count in no group,
    loss or metric. A no-op in trajectory mode, whose row count the config already checked."""
    sizes = [cfg.actor_rollout_ref.actor.ppo_mini_batch_size, cfg.world_size]
    if cfg.use_critic:
        sizes.append(cfg.critic.ppo_mini_batch_size)
    pad = (-len(batch)) % math.lcm(*sizes)
    if pad == 0:
        return batch
    filler = batch[[0] * pad]
    filler.batch[K.RESPONSE_MASK] = torch.zeros_like(filler.batch[K.RESPONSE_MASK])
    nt = filler.non_tensor_batch
    nt[K.FAILED][:] = True
    nt[K.UID][:] = [f"padding-{i}" for i in range(pad)]
    if K.STATUS in nt:
        nt[K.STATUS][:] = "padding"
    return DataProto.concat([batch, filler])


def balance(batch: DataProto, world_size: int) -> None:
    """Reorder rows so every rank gets a similar number of tokens (snake order over sorted lengths)."""
    if world_size == 1:
        return
    lengths = batch.batch[K.ATTENTION_MASK].sum(-1).numpy()
    order = np.argsort(-lengths, kind="stable")
    buckets: list[list[int]] = [[] for _ in range(world_size)]
    for k, row in enumerate(order):
        lap, pos = divmod(k, world_size)
        buckets[pos if lap % 2 == 0 else world_size - 1 - pos].append(int(row))
    batch.reorder(torch.tensor([row for bucket in buckets for row in bucket]))
