"""Read the accumulated gradient of a PPO update: the actor frees its gradients once the optimiser has stepped."""

import torch

from verl.protocol import DataProto
from verl.workers.actor import PPOActor


def update_capturing_grads(
    actor: PPOActor, data: DataProto, sampling: dict
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """``actor.update_policy(data)`` with one mini-batch; returns its gradient just before the step (of the
    parameters that have one), and the metrics."""
    grads, step = {}, actor.clip_and_step

    def record_then_step() -> float:
        grads.update({name: p.grad.clone() for name, p in actor.module.named_parameters() if p.grad is not None})
        return step()

    actor.clip_and_step = record_then_step
    metrics = actor.update_policy(data, sampling)
    assert all(p.grad is None for p in actor.module.parameters())  # spent gradients are freed after the update
    return grads, metrics
