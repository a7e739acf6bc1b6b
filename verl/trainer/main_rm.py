"""Entry point: ``python -m verl.trainer.main_rm [hydra overrides]`` (config: ``config/rm_trainer.yaml``).

The config is composed, type-checked and validated (model folder, trajectory files) before any work
starts; a bad one exits with code 2 and one message. The best dev-AUC weights land in
``<trainer.output_dir>/huggingface`` (a reward-model folder for ``reward_model.model.path``); the last
line printed is that folder, so scripts can capture it. ``--help`` prints `HELP` and exits 0.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from verl.trainer.entry import asks_help, help_text, load_checked, run_trainer

if TYPE_CHECKING:
    from verl.trainer.rm_trainer import RMConfig


HELP = help_text(
    "main_rm",
    "Trains a reward model, a scalar head on model.path, on trajectories the env labelled (data.train_files, made\n"
    "by scripts/make_rm_data.py), pointwise or pairwise (train.objective). The dev AUC (data.val_files) picks the\n"
    "weights saved in <trainer.output_dir>/huggingface, the last line printed, and scores them once on\n"
    'data.test_files ("": none). A bad config exits with code 2 before any work.',
    "rm_trainer",
    "python -m verl.trainer.main_rm model.path=/models/SmolLM2-135M-Instruct train.objective=pairwise",
)


def load_rm_config(overrides: list[str], check_files: bool = True) -> RMConfig:
    """Compose ``rm_trainer.yaml`` with Hydra-syntax overrides, type-check and validate it (with ``check_files``,
    also that the data files exist); raises `ConfigError` on the first problem."""
    from verl.trainer.rm_trainer import RMConfig

    return load_checked(RMConfig, "rm_trainer", "rm", overrides, check_files)


def describe(summary: dict) -> str:
    best = f"best dev AUC {summary['best_dev_auc']:.4f} at step {summary['best_step']} of {summary['steps']}"
    test = summary.get("test")
    if not test:
        return best
    return f"{best}; test AUC {test['auc']:.4f}, pair accuracy {test.get('pair_accuracy', float('nan')):.4f}"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if asks_help(args):
        print(HELP)
        return 0
    from verl.trainer.rm_trainer import RMTrainer

    return run_trainer(args, load_rm_config, RMTrainer, "rm", describe)


if __name__ == "__main__":
    sys.exit(main())
