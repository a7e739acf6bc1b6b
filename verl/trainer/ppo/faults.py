"""What a step does when the world breaks.

* more than ``trainer.max_failed_fraction`` of a step's trajectories failed (env or reward errors):
  `TooManyFailures`; the step is rolled out again once, same tasks and seeds; if it fails again the run stops;
* the rollout's services (e.g. supervised env servers) cannot serve again: the run stops;
* a worker died: the run stops.

A stop is `RunStopped`, raised after the last completed step is checkpointed (when the workers are alive to save
it), with a message that names the cause and the checkpoint to resume from (`verl.trainer.ppo.run_loop`).
Nothing is skipped without a word.
"""

from __future__ import annotations

import numpy as np

from verl.protocol import DataProto


class RunStopped(RuntimeError):
    """The run cannot go on; the message names the cause and the checkpoint to resume from."""


class TooManyFailures(RuntimeError):
    """A step's rollout failed for more than ``trainer.max_failed_fraction`` of its trajectories."""


def check_failures(batch: DataProto, max_failed_fraction: float) -> None:
    """`TooManyFailures` when the failed share of the batch's trajectories is above ``max_failed_fraction``,
    naming the most common error."""
    nt = batch.non_tensor_batch
    failed = np.array(nt.get("failed", [False] * len(batch)), dtype=bool)
    share = float(failed.mean()) if len(failed) else 0.0
    if share <= max_failed_fraction:
        return
    errors = [str(e) for e in np.asarray(nt.get("error", [""] * len(batch)), dtype=object)[failed] if str(e)]
    common = max(set(errors), key=errors.count) if errors else "no error recorded"
    raise TooManyFailures(
        f"{int(failed.sum())} of {len(failed)} trajectories failed (trainer.max_failed_fraction="
        f"{max_failed_fraction}); most common error: {common[:500]}"
    )
