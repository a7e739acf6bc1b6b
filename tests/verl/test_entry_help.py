"""The entry points answer ``--help`` (what they run, their YAML's path, how to override a key; exit 0), and
``main_ppo --check_config`` names the run's folder on its last line, which ``scripts/run_training.sh`` reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from verl.utils.yaml_defaults import CONFIG_DIR

REPO = Path(__file__).resolve().parents[2]
SET_KEY = "set a key of the YAML by its dotted path, e.g. trainer.output_dir=outputs/mine"
ADD_KEY = "add a key the YAML lacks (the config is typed: a key no section takes is refused)"


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"verl.trainer.{module}", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "module, config, usage, runs, overrides, example",
    [
        (
            "main_ppo",
            "ppo_trainer",
            "usage: python -m verl.trainer.main_ppo [--check_config] [preset=NAME] [key=value ...] [+key=value ...]",
            "Trains actor_rollout_ref.model.path with RL "
            "(algorithm.adv_estimator: gae is PPO with a critic, grpo, ...) on",
            [f"  key=value       {SET_KEY}", f"  +key=value      {ADD_KEY}"],
            "  python -m verl.trainer.main_ppo preset=grpo actor_rollout_ref.model.path=/models/SmolLM2-135M-Instruct "
            "trainer.total_training_steps=10",
        ),
        (
            "main_sft",
            "sft_trainer",
            "usage: python -m verl.trainer.main_sft [key=value ...] [+key=value ...]",
            "Fine-tunes model.path on expert demonstrations "
            "(data.train_files, made by scripts/make_sft_data.py): the warm",
            [f"  key=value   {SET_KEY}", f"  +key=value  {ADD_KEY}"],
            "  python -m verl.trainer.main_sft model.path=/models/SmolLM2-135M-Instruct train.epochs=1 optim.lr=5e-5",
        ),
        (
            "main_rm",
            "rm_trainer",
            "usage: python -m verl.trainer.main_rm [key=value ...] [+key=value ...]",
            "Trains a reward model, a scalar head on model.path, on trajectories the env labelled "
            "(data.train_files, made",
            [f"  key=value   {SET_KEY}", f"  +key=value  {ADD_KEY}"],
            "  python -m verl.trainer.main_rm model.path=/models/SmolLM2-135M-Instruct train.objective=pairwise",
        ),
    ],
)
def test_help_says_what_runs_where_the_yaml_is_and_how_to_override(module, config, usage, runs, overrides, example):
    proc = run_module(module, "--help")
    assert (proc.returncode, proc.stderr) == (0, "")
    lines = proc.stdout.splitlines()
    assert lines[:3] == [usage, "", runs]
    where = lines.index(f"config: {CONFIG_DIR / f'{config}.yaml'} (every key, its default and what it does)")
    assert lines[where + 1 : where + 3] == overrides
    assert lines[-2:] == ["example:", example]
    assert (CONFIG_DIR / f"{config}.yaml").is_file()


def test_main_ppo_help_names_the_presets_and_the_config_check():
    proc = run_module("main_ppo", "-h")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert "  --check_config  check the whole config, print [config] ok and [config] output_dir=DIR, and stop" in lines
    assert "  preset=NAME     lay the job recipe preset/NAME.yaml (next to the YAML: grpo, ppo) over it" in lines
    assert "  -h, --help      print this text and exit" in lines


@pytest.mark.parametrize(
    "overrides, output_dir",
    [
        (["trainer.experiment_name=webshop_grpo"], "outputs/webshop_grpo"),
        (["trainer.experiment_name=webshop_grpo", "trainer.output_dir={tmp}/run"], "{tmp}/run"),
    ],
    ids=["from-the-experiment-name", "given"],
)
def test_check_config_ends_with_the_runs_folder(tmp_path, overrides, output_dir):
    """The folder as the config resolves ``trainer.output_dir`` (``outputs/${trainer.experiment_name}``); the check
    looks only for the model's ``config.json`` and the data files, so empty ones do."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    for name in ("train", "dev"):
        (tmp_path / f"{name}.parquet").touch()
    proc = run_module(
        "main_ppo",
        "--check_config",
        "preset=grpo",
        f"actor_rollout_ref.model.path={tmp_path / 'model'}",
        f"data.train_files={tmp_path / 'train.parquet'}",
        f"data.val_files={tmp_path / 'dev.parquet'}",
        *(item.format(tmp=tmp_path) for item in overrides),
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"[config] ok\n[config] output_dir={output_dir.format(tmp=tmp_path)}\n"
