"""Entry point: ``python -m verl.trainer.main_ppo [--check_config] [hydra overrides]``.

Order (every check before any work): validate the whole config (data files,
model folder, writable output dirs, the rollout plugin's section); with
``--check_config`` stop there. Then start the rollout plugin's services (e.g.
supervised env servers), run its preflight (its env servers answer), write
``config.json``, start (or join) Ray, build the trainer and run it. Exit codes:
0 done, 2 bad config, 3 the run stopped on a fault (the message names it and
the checkpoint to resume from).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verl.workers.config import ConfigError


def run(overrides: list[str], check_only: bool = False) -> dict:
    from verl.trainer.ppo.config import load_config
    from verl.trainer.ppo.rollout import load_rollout_plugin

    cfg = load_config(overrides)
    if check_only:
        print("[config] ok", flush=True)
        return {}
    plugin = load_rollout_plugin(cfg.data.rollout)
    out = Path(cfg.trainer.output_dir)
    services = plugin.start(cfg, out)  # e.g. env servers the run owns, supervised
    try:
        plugin.preflight(cfg)  # e.g. the env servers answer
        return _train(cfg, out, services)
    finally:
        if services is not None:
            services.close()


def _train(cfg, out: Path, services) -> dict:
    import ray
    from transformers import AutoTokenizer

    from verl.trainer.ppo.config import resolve_precision
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, dump_config

    precision = resolve_precision(cfg)
    dump_config(cfg, out / "config.json", precision=precision)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    env_vars = {"TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled"}
    if cfg.ray_init.address:
        ray.init(address=cfg.ray_init.address, runtime_env={"env_vars": env_vars})
    else:
        ray.init(num_cpus=cfg.ray_init.num_cpus, include_dashboard=cfg.ray_init.include_dashboard, runtime_env={"env_vars": env_vars})
    tokenizer = AutoTokenizer.from_pretrained(cfg.actor_rollout_ref.model.path)
    trainer = RayPPOTrainer(cfg, tokenizer, services=services)
    try:
        trainer.init_workers()
        return trainer.fit()
    finally:
        trainer.shutdown()
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    from verl.single_controller.ray import WorkerError
    from verl.trainer.ppo.ray_trainer import RunStopped

    args = list(sys.argv[1:] if argv is None else argv)
    check_only = "--check_config" in args
    try:
        run([a for a in args if a != "--check_config"], check_only=check_only)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except (RunStopped, WorkerError) as exc:
        print(f"run stopped: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
