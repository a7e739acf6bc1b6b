"""Entry point: ``python -m verl.trainer.main_rm [hydra overrides]`` (config: ``config/rm_trainer.yaml``).

The config is composed, type-checked and validated (model folder, trajectory files) before any work
starts; a bad one exits with code 2 and one message. The best dev-AUC weights land in
``<trainer.output_dir>/huggingface`` (a reward-model folder for ``reward_model.model.path``); the last
line printed is that folder, so scripts can capture it.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from verl.utils.typed_config import ConfigError, load_yaml_config

if TYPE_CHECKING:
    from verl.trainer.rm_trainer import RMConfig


def load_rm_config(overrides: list[str], check_files: bool = True) -> RMConfig:
    """Compose ``rm_trainer.yaml`` with Hydra-syntax overrides, type-check and validate it (with ``check_files``,
    also that the data files exist); raises `ConfigError` on the first problem."""
    from verl.trainer.rm_trainer import RMConfig

    cfg = load_yaml_config(RMConfig, "rm_trainer", overrides, "rm")
    if check_files:
        cfg.check_files("rm")
    return cfg


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("WORLD_SIZE", "1")
    try:
        cfg = load_rm_config(list(sys.argv[1:] if argv is None else argv))
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    from verl.trainer.rm_trainer import RMTrainer

    trainer = RMTrainer(cfg)
    try:
        summary = trainer.fit()
    finally:
        trainer.leave_distributed()
    test = summary.get("test")
    print(
        f"[rm] best dev AUC {summary['best_dev_auc']:.4f} at step {summary['best_step']} of {summary['steps']}"
        + (f"; test AUC {test['auc']:.4f}, pair accuracy {test.get('pair_accuracy', float('nan')):.4f}" if test else "")
    )
    print(summary["hf_folder"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
