"""Entry point: ``python -m verl.trainer.main_sft [hydra overrides]`` (config: ``config/sft_trainer.yaml``).

The config is composed, type-checked and validated (model folder, sample files)
before any work starts; a bad one exits with code 2 and one message. The best
dev-loss weights land in ``<trainer.output_dir>/huggingface``; the last line
printed is that folder, so scripts can capture it. ``--help`` prints `HELP` and exits 0.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from verl.trainer.entry import asks_help, help_text, load_checked, run_trainer

if TYPE_CHECKING:
    from verl.trainer.sft_trainer import SFTConfig


HELP = help_text(
    "main_sft",
    "Fine-tunes model.path on expert demonstrations (data.train_files, made by scripts/make_sft_data.py): the warm\n"
    "start before RL. The dev loss (data.val_files) picks the weights saved in <trainer.output_dir>/huggingface,\n"
    "the last line printed. A bad config exits with code 2 before any work.",
    "sft_trainer",
    "python -m verl.trainer.main_sft model.path=/models/SmolLM2-135M-Instruct train.epochs=1 optim.lr=5e-5",
)


def load_sft_config(overrides: list[str], check_files: bool = True) -> SFTConfig:
    """Compose ``sft_trainer.yaml`` with Hydra-syntax overrides, type-check and validate it (with ``check_files``,
    also that the data files exist); raises `ConfigError` on the first problem."""
    from verl.trainer.sft_trainer import SFTConfig

    return load_checked(SFTConfig, "sft_trainer", "sft", overrides, check_files)


def describe(summary: dict) -> str:
    return f"best dev loss {summary['best_dev_loss']:.4f} at step {summary['best_step']} of {summary['steps']}"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if asks_help(args):
        print(HELP)
        return 0
    from verl.trainer.sft_trainer import SFTTrainer

    return run_trainer(args, load_sft_config, SFTTrainer, "sft", describe)


if __name__ == "__main__":
    sys.exit(main())
