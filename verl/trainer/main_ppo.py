"""Entry point: ``python -m verl.trainer.main_ppo [hydra overrides]``.

Validates the whole config and runs the rollout plugin's preflight (the agent's:
its environment servers answer) before any worker starts; then starts (or joins) Ray, builds the trainer and runs it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verl.workers.config import ConfigError


def run(overrides: list[str]) -> dict:
    import ray
    from transformers import AutoTokenizer

    from verl.trainer.ppo.config import load_config, resolve_precision
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, dump_config
    from verl.trainer.ppo.rollout import load_rollout_plugin

    cfg = load_config(overrides)
    load_rollout_plugin(cfg.data.rollout).preflight(cfg)  # e.g. the env servers answer
    precision = resolve_precision(cfg)
    out = Path(cfg.trainer.output_dir)
    dump_config(cfg, out / "config.json", precision=precision)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    env_vars = {"TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled"}
    if cfg.ray_init.address:
        ray.init(address=cfg.ray_init.address, runtime_env={"env_vars": env_vars})
    else:
        ray.init(num_cpus=cfg.ray_init.num_cpus, include_dashboard=cfg.ray_init.include_dashboard, runtime_env={"env_vars": env_vars})
    tokenizer = AutoTokenizer.from_pretrained(cfg.actor_rollout_ref.model.path)
    trainer = RayPPOTrainer(cfg, tokenizer)
    try:
        trainer.init_workers()
        return trainer.fit()
    finally:
        trainer.shutdown()
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    try:
        run(list(sys.argv[1:] if argv is None else argv))
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
