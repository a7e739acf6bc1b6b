"""Entry point: ``python -m verl.trainer.main_sft [hydra overrides]`` (config: ``config/sft_trainer.yaml``).

The config is composed, type-checked and validated (model folder, sample files)
before any work starts; a bad one exits with code 2 and one message. The best
dev-loss weights land in ``<trainer.output_dir>/huggingface``; the last line
printed is that folder, so scripts can capture it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from verl.utils.typed_config import ConfigError, load_yaml_config

if TYPE_CHECKING:
    from verl.trainer.sft_trainer import SFTConfig


def load_sft_config(overrides: list[str], check_files: bool = True) -> SFTConfig:
    """Compose ``sft_trainer.yaml`` with Hydra-syntax overrides, type-check and validate it (with ``check_files``,
    also that the data files exist); raises `ConfigError` on the first problem."""
    from verl.trainer.sft_trainer import SFTConfig

    cfg = load_yaml_config(SFTConfig, "sft_trainer", overrides, "sft")
    if check_files:
        cfg.check_files("sft")
    return cfg


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("WORLD_SIZE", "1")
    try:
        cfg = load_sft_config(list(sys.argv[1:] if argv is None else argv))
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    from verl.trainer.sft_trainer import SFTTrainer

    trainer = SFTTrainer(cfg)
    try:
        summary = trainer.fit()
    finally:
        trainer.leave_distributed()  # nccl warns of leaked resources when a process exits still in its group
    print(f"[sft] best dev loss {summary['best_dev_loss']:.4f} at step {summary['best_step']} of {summary['steps']}")
    print(summary["hf_folder"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
