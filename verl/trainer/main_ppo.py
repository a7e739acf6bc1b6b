"""Entry point: ``python -m verl.trainer.main_ppo [--check_config] [preset=NAME] [hydra overrides]``.

``--help`` prints `HELP` and exits 0. Order (every check before any work):
validate the whole config (data files, model folder, writable output dirs, the
rollout plugin's section); with ``--check_config`` stop there, printing
``[config] ok`` and, last, ``[config] output_dir=<trainer.output_dir>`` (the
run's folder as the overrides resolve it, for scripts). Then start (or join)
Ray, start the rollout plugin's services (e.g. supervised env servers, here or
on other Ray nodes), run its preflight (its env servers answer), write
``config.json``, place the workers (the cluster must hold them as
``trainer.*`` says), and train. Exit codes: 0 done, 2 bad config or a cluster
that cannot hold the workers, 3 the run stopped on a fault (the message names
it and the checkpoint to resume from).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verl.trainer.entry import asks_help, help_text
from verl.utils.typed_config import ConfigError
from verl.utils.yaml_defaults import CONFIG_DIR

PRESETS = sorted(path.stem for path in (CONFIG_DIR / "preset").glob("*.yaml"))
HELP = help_text(
    "main_ppo",
    "Trains actor_rollout_ref.model.path with RL (algorithm.adv_estimator: gae is PPO with a critic, grpo, ...) on\n"
    "the rollouts of data.rollout (by default the multi-turn agent on env servers). The whole config is checked\n"
    "first. Exit codes: 0 done, 2 a bad config or a cluster that cannot hold the workers, 3 the run stopped on a\n"
    "fault (the message names the checkpoint to resume from).",
    "ppo_trainer",
    "python -m verl.trainer.main_ppo preset=grpo actor_rollout_ref.model.path=/models/SmolLM2-135M-Instruct "
    "trainer.total_training_steps=10",
    [
        ("--check_config", "check the whole config, print [config] ok and [config] output_dir=DIR, and stop"),
        ("preset=NAME", f"lay the job recipe preset/NAME.yaml (next to the YAML: {', '.join(PRESETS)}) over it"),
    ],
)


def run(overrides: list[str], check_only: bool = False) -> dict:
    from verl.trainer.ppo.config import load_config
    from verl.trainer.ppo.rollout import load_rollout_plugin

    cfg = load_config(overrides)
    if check_only:
        print("[config] ok", flush=True)
        print(f"[config] output_dir={cfg.trainer.output_dir}", flush=True)
        return {}
    import ray

    plugin = load_rollout_plugin(cfg.data.rollout)
    out = Path(cfg.trainer.output_dir)
    _init_ray(cfg)  # first: the rollout's services may run on the cluster's nodes (agent.server_nodes)
    try:
        services = plugin.start(cfg, out)  # e.g. env servers the run owns, supervised
        try:
            plugin.preflight(cfg)  # e.g. the env servers answer
            return _train(cfg, out, services)
        finally:
            if services is not None:
                services.close()
    finally:
        ray.shutdown()


def _init_ray(cfg) -> None:
    """Join the cluster at ``ray_init.address``, or start a local Ray (never joining one found on this machine)."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    env_vars = {"TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled"}
    if cfg.ray_init.address:
        ray.init(address=cfg.ray_init.address, runtime_env={"env_vars": env_vars})
    else:
        # address="local": a Ray of this run's own, even when a cluster already runs on this machine
        ray.init(
            address="local",
            num_cpus=cfg.ray_init.num_cpus,
            include_dashboard=cfg.ray_init.include_dashboard,
            runtime_env={"env_vars": env_vars},
        )


def _train(cfg, out: Path, services) -> dict:
    from transformers import AutoTokenizer

    from verl.trainer.ppo.config import resolve_precision
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, dump_config

    precision = resolve_precision(cfg)
    dump_config(cfg, out / "config.json", precision=precision)
    tokenizer = AutoTokenizer.from_pretrained(cfg.actor_rollout_ref.model.path)
    trainer = RayPPOTrainer(cfg, tokenizer, services=services)
    try:
        trainer.init_workers()
        return trainer.fit()
    finally:
        trainer.shutdown()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if asks_help(args):
        print(HELP)
        return 0
    from verl.single_controller.ray import ResourceError, WorkerError
    from verl.trainer.ppo.faults import RunStopped

    check_only = "--check_config" in args
    try:
        run([a for a in args if a != "--check_config"], check_only=check_only)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except ResourceError as exc:  # the cluster cannot hold the workers as configured: nothing was trained
        print(f"resource error: {exc}", file=sys.stderr)
        return 2
    except (RunStopped, WorkerError) as exc:
        print(f"run stopped: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
