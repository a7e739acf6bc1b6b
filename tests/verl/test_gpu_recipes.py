"""The GPU recipes (``examples/gpu/*.args``) pass the trainer's whole config check (every check but the files,
which live on the GPU machine), keep one optimiser step per batch on every rank count, and their ``sft.*`` lines
pass the warm start's SFT config check."""

from pathlib import Path

import pytest

from verl.trainer.ppo.config import load_config

RECIPES = sorted((Path(__file__).resolve().parents[2] / "examples" / "gpu").glob("*.args"))


def overrides(recipe: Path, sft: bool = False) -> list[str]:
    """The recipe's trainer overrides, or (``sft``) its ``sft.*`` ones for the warm start, prefix removed."""
    lines = [line.strip() for line in recipe.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return [line.removeprefix("sft.") for line in lines if line.startswith("sft.") == sft]


def test_there_are_recipes_for_one_gpu_and_for_eight():
    assert [recipe.stem for recipe in RECIPES] == ["eight_gpus", "one_gpu"]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda recipe: recipe.stem)
def test_a_gpu_recipe_passes_the_config_check(recipe: Path):
    cfg = load_config(
        [
            "actor_rollout_ref.model.path=/models/Qwen2.5-1.5B-Instruct",
            "preset=grpo",  # as train_grpo.sh passes it, before the recipe's lines
            *overrides(recipe),
        ],
        check_files=False,
    )
    actor = cfg.actor_rollout_ref.actor
    assert (cfg.trainer.device, actor.mixed_precision, cfg.actor_rollout_ref.rollout.dtype) == (
        "cuda",
        "bfloat16",
        "bfloat16",
    )
    assert cfg.data.train_batch_size * cfg.agent["n"] == actor.ppo_mini_batch_size  # one optimiser step per batch
    assert actor.ppo_mini_batch_size % cfg.trainer.n_workers_per_node == 0
    assert cfg.trainer.n_workers_per_node == {"one_gpu": 1, "eight_gpus": 8}[recipe.stem]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda recipe: recipe.stem)
def test_a_gpu_recipes_sft_overrides_pass_the_sft_config_check(recipe: Path, tiny_model_path: str):
    from verl.trainer.main_sft import load_sft_config

    assert overrides(recipe, sft=True) == ["train.max_token_len=16384"]
    cfg = load_sft_config([f"model.path={tiny_model_path}", *overrides(recipe, sft=True)], check_files=False)
    assert cfg.train.max_token_len == 16384
