"""Entry point: ``python -m verl.trainer.main_sft [hydra overrides]`` (config: ``config/sft_trainer.yaml``).

The config is composed, type-checked and validated (model folder, sample files)
before any work starts; a bad one exits with code 2 and one message. The best
dev-loss weights land in ``<trainer.output_dir>/huggingface``; the last line
printed is that folder, so scripts can capture it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from verl.workers.config import ConfigError, from_dict

CONFIG_DIR = Path(__file__).resolve().parent / "config"


def load_sft_config(overrides: list[str]):
    """Compose ``sft_trainer.yaml`` with Hydra-syntax overrides and validate it."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException
    from omegaconf import OmegaConf

    from verl.trainer.sft_trainer import SFTConfig

    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            raw = compose(config_name="sft_trainer", overrides=list(overrides))
    except ConfigCompositionException as exc:
        raise ConfigError(f"bad override: {exc.__cause__ or exc}") from None
    return from_dict(SFTConfig, OmegaConf.to_container(raw, resolve=True), "sft")


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
    summary = trainer.fit()
    print(f"[sft] best dev loss {summary['best_dev_loss']:.4f} at step {summary['best_step']} of {summary['steps']}")
    print(summary["hf_folder"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
