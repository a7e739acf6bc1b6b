"""Read the accumulated gradient of a PPO update: a trainable frees its gradients once the optimiser has stepped."""

from typing import Callable

import torch

from verl.protocol import DataProto
from verl.workers.actor import PPOActor
from verl.workers.trainable import TrainableModule


def capturing_grads(
    model: TrainableModule, update: Callable[[], dict[str, float]]
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """Run ``update`` (one optimiser step of ``model``); returns its gradient just before the step (of the
    parameters that have one), and the update's metrics."""
    grads, step = {}, model.clip_and_step

    def record_then_step() -> float:
        grads.update({name: p.grad.clone() for name, p in model.module.named_parameters() if p.grad is not None})
        return step()

    model.clip_and_step = record_then_step
    metrics = update()
    assert all(p.grad is None for p in model.module.parameters())  # spent gradients are freed after the update
    return grads, metrics


def update_capturing_grads(
    actor: PPOActor, data: DataProto, sampling: dict
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """``actor.update_policy(data)`` with one mini-batch, through `capturing_grads`."""
    return capturing_grads(actor, lambda: actor.update_policy(data, sampling))
