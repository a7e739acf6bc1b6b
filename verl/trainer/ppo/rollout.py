"""Where the trainer's trajectories come from: a rollout plugin, named by ``data.rollout``.

The engine knows no agent and no environment. A *rollout* is any object with::

    pad_id: int                                    # pad token of the rows it returns
    run_llm_loop(tasks: DataProto, do_sample: bool = True, global_step: int = 0,
                 output_dir: str | None = None) -> DataProto
    close() -> None                                # optional: release servers, threads
    open_journal(path, key) -> journal             # optional: a journal run_llm_loop(..., journal=) writes as
                                                   # trajectories finish and replays when given again
                                                   # (`verl.trainer.ppo.step_journal`)

``run_llm_loop`` turns a batch of dataset rows into trajectories: tensors
``prompts``, ``responses``, ``input_ids``, ``attention_mask``, ``position_ids``,
``response_mask`` (1 on the tokens the policy produced) and
``rollout_log_probs``; non-tensors ``uid`` (one per task: the group),
``task_id``, ``failed``, ``status`` and every dataset column the reward path
reads (``data_source``, ``reward_model``, ``extra_info``); ``meta_info["metrics"]``
for logging. The reward path (`verl.trainer.ppo.reward`) then scores each row.

A `RolloutPlugin` builds the training rollout (``n`` samples per task) and the
validation one (one each), checks its own config section before any work starts,
may start what it needs outside the workers (`RolloutServices`: env servers it
supervises, say), and checks the outside world before any worker starts.
``data.rollout`` names a plugin: a built-in (``single_turn``), one an installed
package registers under the ``verl.rollouts`` entry-point group (this project's
multi-turn agent registers ``agent``), or ``package.module:ATTRIBUTE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Protocol

from verl.protocol import DataProto
from verl.utils.imports import load_target
from verl.utils.typed_config import ConfigError

ENTRY_POINT_GROUP = "verl.rollouts"
BUILTIN_ROLLOUTS = {"single_turn": "verl.trainer.ppo.single_turn:PLUGIN"}


class Rollout(Protocol):
    pad_id: int

    def run_llm_loop(
        self, tasks: DataProto, do_sample: bool = True, global_step: int = 0, output_dir: str | None = None
    ) -> DataProto: ...


class RolloutServices(Protocol):
    """What a rollout runs outside the workers for the whole run (e.g. supervised env servers); the trainer owns it.

    ``wait_ready(timeout_s)`` blocks until the services can serve: None, or why they never will again
    (the trainer then checkpoints and stops with that message). ``metrics()`` joins each step's metrics.
    """

    def wait_ready(self, timeout_s: float) -> str | None: ...

    def metrics(self) -> dict[str, float]: ...

    def close(self) -> None: ...


def _nothing(cfg: Any) -> None:
    return None


def _no_services(cfg: Any, output_dir: Path) -> None:
    return None


@dataclass(frozen=True)
class RolloutPlugin:
    """``build(cfg, tokenizer, generator, n)`` -> a rollout; ``generator`` is the ActorRolloutRef worker group.

    ``validate(cfg)`` raises `ConfigError` (or ``ValueError``/``TypeError``) on a bad config,
    before any work; ``start(cfg, output_dir)`` starts the plugin's `RolloutServices` (or
    returns None) after every check and before any worker; ``preflight(cfg)`` raises
    `ConfigError` when something outside is not ready, before any worker starts;
    ``response_budget(cfg)`` is the most response tokens a row can hold (Dr. GRPO's constant).
    """

    build: Callable[[Any, Any, Any, int], Rollout]
    response_budget: Callable[[Any], int]
    validate: Callable[[Any], None] = _nothing
    preflight: Callable[[Any], None] = _nothing
    start: Callable[[Any, Path], RolloutServices | None] = _no_services


def _load_target(target: str) -> Any:
    try:
        return load_target(target, "data.rollout")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def load_rollout_plugin(name: str) -> RolloutPlugin:
    """The plugin ``data.rollout`` names (see the module docstring for where names come from)."""
    if name in BUILTIN_ROLLOUTS:
        plugin = _load_target(BUILTIN_ROLLOUTS[name])
    elif ":" in name:
        plugin = _load_target(name)
    else:
        registered = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
        if name not in registered:
            known = sorted({*BUILTIN_ROLLOUTS, *registered})
            raise ConfigError(
                f"data.rollout: unknown rollout {name!r}; known: {known}, or package.module:ATTRIBUTE "
                f"(installed packages register rollouts under the {ENTRY_POINT_GROUP!r} entry-point group)"
            )
        plugin = registered[name].load()
    if not isinstance(plugin, RolloutPlugin):
        raise ConfigError(f"data.rollout={name!r} is a {type(plugin).__name__}, not a RolloutPlugin")
    return plugin
