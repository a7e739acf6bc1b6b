"""Entry point: ``python -m verl.trainer.main_ppo [--check_config] [hydra overrides]``.

Order (every check before any work): validate the whole config (data files,
model folder, writable output dirs, the rollout plugin's section); with
``--check_config`` stop there. Then start (or join) Ray, start the rollout
plugin's services (e.g. supervised env servers, here or on other Ray nodes),
run its preflight (its env servers answer), write ``config.json``, place the
workers (the cluster must hold them as ``trainer.*`` says), and train. Exit
codes: 0 done, 2 bad config or a cluster that cannot hold the workers, 3 the
run stopped on a fault (the message names it and the checkpoint to resume
from).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verl.utils.typed_config import ConfigError


def run(overrides: list[str], check_only: bool = False) -> dict:
    from verl.trainer.ppo.config import load_config
    from verl.trainer.ppo.rollout import load_rollout_plugin

    cfg = load_config(overrides)
    if check_only:
        print("[config] ok", flush=True)
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
    from verl.single_controller.ray import ResourceError, WorkerError
    from verl.trainer.ppo.faults import RunStopped

    args = list(sys.argv[1:] if argv is None else argv)
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
