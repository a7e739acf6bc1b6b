"""The run around the steps: resume, validation and checkpoint schedule, stopping, and what a fault does.

    resume from the latest checkpoint (or start: then validate first with trainer.val_before_train)
    while step < trainer.total_training_steps:
        wait for the rollout's services; step += 1
        metrics = train_step(tasks)        # rolled out once more on TooManyFailures, then the run stops
        every test_freq steps (and at the last): validate; with keep_best, a new best is checkpointed and named
        every save_freq steps (and at the last, or at stop_after_step): checkpoint
        log; stop early at trainer.max_minutes (counted from the start, validations included) or stop_after_step

A stop on a fault (`verl.trainer.ppo.faults`) checkpoints the last completed step when the workers can still save
it, then raises `RunStopped` naming the cause and the checkpoint to resume from.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from verl.protocol import DataProto
from verl.single_controller.ray import WorkerError
from verl.trainer.ppo.faults import RunStopped, TooManyFailures
from verl.trainer.ppo.one_step_off import Collected
from verl.utils.memory import current_rss_gb
from verl.utils.timing import PhaseTimer
from verl.utils.tracking import Tracking, progress_bar

if TYPE_CHECKING:
    from concurrent.futures import Future

    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

SERVICES_WAIT_S = 600.0  # how long a step waits for the rollout's services (e.g. a restarting env server)


def fit(trainer: RayPPOTrainer) -> dict[str, float]:
    """Train for ``trainer.total_training_steps`` steps; returns the last step's metrics (`RunStopped` on a fault)."""
    t = trainer.config.trainer
    tracker = Tracking(
        t.project_name, t.experiment_name, t.logger, str(trainer.output_dir), config=None,
        total_steps=t.total_training_steps,
    )  # fmt: skip
    trainer.load_checkpoint()
    if trainer.global_step == 0:
        trainer.checkpoints.forget_best()
    last: dict[str, float] = {}
    started = time.monotonic()
    try:
        if t.val_before_train and trainer.global_step == 0 and t.test_freq > 0:
            _wait_for_services(trainer, 0, None)
            metrics = trainer.validate()
            if trainer.checkpoints.is_new_best(metrics):
                trainer.checkpoints.mark_best(0, metrics)
            tracker.log(metrics, step=0)
        progress = progress_bar(t.total_training_steps, trainer.global_step)
        while trainer.global_step < t.total_training_steps:
            ahead = trainer.ahead.take()
            # before: what a checkpoint of the last completed step must hold as the dataloader
            before = trainer.train_loader.state_dict() if ahead is None else ahead.loader_before
            _wait_for_services(trainer, trainer.global_step, before)
            trainer.global_step += 1
            step = trainer.global_step
            tasks, ready = (trainer.train_loader.next_batch(), None) if ahead is None else (ahead.tasks, ahead.job)
            metrics = _guarded_step(trainer, tasks, before, ready)
            metrics["train/epoch"] = float(trainer.train_loader.epoch)
            out_of_time = t.max_minutes is not None and (time.monotonic() - started) / 60 >= t.max_minutes
            is_last = step == t.total_training_steps or out_of_time
            new_best = False
            if t.test_freq > 0 and (step % t.test_freq == 0 or is_last):
                trainer.settle()
                metrics.update(trainer.validate())
                new_best = trainer.checkpoints.is_new_best(metrics)
            scheduled = t.save_freq > 0 and (step % t.save_freq == 0 or is_last or step == t.stop_after_step)
            if new_best or scheduled:
                with PhaseTimer(metrics)("save_checkpoint"):
                    trainer.save_checkpoint()
                    if new_best:  # after the save: the file never names a checkpoint that is not there
                        trainer.checkpoints.mark_best(step, metrics)
            tracker.log(metrics, step=step)
            last = metrics
            if progress is not None:
                progress.update(1)
            if out_of_time:
                trainer.ahead.wait()
                spent = f"{(time.monotonic() - started) / 60:.1f} min"
                print(
                    f"[trainer] stopping after step {step}: trainer.max_minutes={t.max_minutes} spent ({spent})",
                    flush=True,
                )
                break
            if t.stop_after_step is not None and step >= t.stop_after_step:
                trainer.ahead.wait()
                print(f"[trainer] stopping after step {step} (trainer.stop_after_step)", flush=True)
                break
    finally:
        tracker.close()
        if tracker.jsonl_path.is_file():
            from verl.utils.plot import plot_metrics

            plot_metrics(tracker.jsonl_path, trainer.output_dir / "metrics.png")
    return last


def _guarded_step(
    trainer: RayPPOTrainer, tasks: DataProto, loader_before: dict, ready: Future | Collected | None
) -> dict[str, float]:
    """`train_step`, rolled out once more when too many trajectories failed; a second failure or a dead worker
    stops the run. ``loader_before``: the dataloader before this step's tasks were drawn; ``ready``: their
    rollout, started ahead."""
    step = trainer.global_step
    try:
        try:
            metrics = trainer.train_step(tasks, ready)
            metrics["trainer/step_retries"] = 0.0
        except TooManyFailures as exc:
            print(f"[trainer] step {step}: {exc}; rolling the step out again (once)", flush=True)
            _wait_for_services(trainer, step - 1, loader_before)
            metrics = trainer.train_step(tasks)
            metrics["trainer/step_retries"] = 1.0
    except TooManyFailures as exc:
        stop(trainer, f"step {step} failed twice: {exc}", step - 1, loader_before)
    except WorkerError as exc:  # the workers cannot save: the latest checkpoint on disk is where to resume
        stop(trainer, f"a worker died in step {step}: {exc}", step - 1, None)
    metrics["memory/rss_gb/driver"] = current_rss_gb()
    if trainer.services is not None:
        metrics.update(trainer.services.metrics())
    return metrics


def _wait_for_services(trainer: RayPPOTrainer, completed: int, loader_state: dict | None) -> None:
    """Block until the rollout's services can serve; stop the run if they never will."""
    if trainer.services is None:
        return
    problem = trainer.services.wait_ready(SERVICES_WAIT_S)
    if problem is not None:
        stop(trainer, problem, completed, loader_state)


def stop(trainer: RayPPOTrainer, cause: str, completed: int, loader_state: dict | None) -> None:
    """Checkpoint step ``completed`` (with the dataloader as it was after it) unless ``loader_state`` is None or it
    is saved already, then raise `RunStopped` naming the cause and the checkpoint to resume from."""
    trainer.ahead.drop()  # a rollout running ahead is given up: the loader state below draws its tasks again
    store = trainer.checkpoints
    if loader_state is not None and completed > 0 and store.latest_step() != completed:
        trainer.global_step = completed
        trainer.train_loader.load_state_dict(loader_state)
        trainer.save_checkpoint()
    latest = store.latest_step()
    where = (
        f"the latest checkpoint is {store.step_dir(latest)}; re-run the same command to resume from it"
        if latest is not None
        else "no checkpoint was written; re-running starts from the beginning"
    )
    print(f"[trainer] stopping: {cause}", flush=True)
    raise RunStopped(f"{cause}\n{where}")
