"""scripts/bench_workers.py --levers: the training half of a learning-run step on a recorded rollout."""

from __future__ import annotations

import json

import pytest
from bench_workers import lever_step, recorded_batch


@pytest.fixture
def records(tmp_path):
    """Two recorded trajectories: a prompt, then a model turn (learned) and an observation (not learned)."""
    path = tmp_path / "step.jsonl"
    rows = [
        {
            "failed": False,
            "prompt_text": "Find a red mug.",
            "segments": [
                {"text": "search[red mug]", "mask": 1},
                {"text": " Results: B01 red mug", "mask": 0},
                {"text": "click[B01]", "mask": 1},
            ],
        },
        {"failed": True, "prompt_text": "x", "segments": []},
        {
            "failed": False,
            "prompt_text": "Find a blue cup under 10 dollars.",
            "segments": [{"text": "search[blue cup]", "mask": 1}],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_the_recorded_batch_learns_only_the_model_turns(records, tiny_model_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    data = recorded_batch(records, tok, pad_id=0)
    assert len(data) == 2  # the failed trajectory is skipped
    learned = [
        len(tok("search[red mug]", add_special_tokens=False).input_ids)
        + len(tok("click[B01]", add_special_tokens=False).input_ids),
        len(tok("search[blue cup]", add_special_tokens=False).input_ids),
    ]
    assert data.batch["response_mask"].sum(dim=1).tolist() == learned


@pytest.mark.parametrize("rank, checkpointing", [(0, True), (4, False)])
def test_lever_step_times_the_reference_pass_and_one_update(records, tiny_model_path, rank, checkpointing):
    cfg = {
        "model": {
            "path": tiny_model_path,
            "lora_rank": rank,
            "lora_alpha": 8.0,
            "enable_gradient_checkpointing": checkpointing,
        },
        "actor": {"mixed_precision": "float32", "shuffle": False, "optim": {"lr": 1e-6}},
        "num_threads": 1,
    }
    from transformers import AutoTokenizer

    ref_s, update_s, peak_rss_gb, tokens = lever_step(cfg, records, steps=1, threads=1)
    assert ref_s > 0 and update_s > 0 and peak_rss_gb > 0
    assert tokens == int(
        recorded_batch(records, AutoTokenizer.from_pretrained(tiny_model_path), 0).batch["attention_mask"].sum()
    )


def test_overhead_row_times_update_actor_and_the_bare_loop_on_the_same_batch(tiny_model_path):
    from bench_workers import overhead_row

    cfg = {
        "model": {"path": tiny_model_path, "enable_gradient_checkpointing": False},
        "actor": {
            "ppo_mini_batch_size": 4,
            "ppo_micro_batch_size_per_gpu": 2,
            "mixed_precision": "float32",
            "shuffle": False,
            "optim": {"lr": 1e-6},
        },
        "num_threads": 1,
    }
    update_tps, bare_tps = overhead_row(cfg, rows=4, length=32, micro_rows=2, steps=1, threads=1)
    assert update_tps > 0 and bare_tps > 0


def test_tree_step_counts_the_tokens_each_packing_runs_and_agrees_with_the_flat_step(records, tiny_model_path):
    from bench_workers import tree_step
    from transformers import AutoTokenizer

    from verl.utils.prefix_tree import pack_rows, row_tokens, tree_size

    data = recorded_batch(records, AutoTokenizer.from_pretrained(tiny_model_path), 0)
    rows = row_tokens(data.batch["input_ids"], data.batch["attention_mask"])
    width = int(data.batch["attention_mask"].any(dim=0).sum())  # the columns some row uses: the flat micro-batch's
    results = {}
    for tree, extra in (("off", {}), ("on", {}), ("path", {"long_segment": 2})):  # path: segments run causally
        cfg = {
            "model": {"path": tiny_model_path},
            "actor": {
                "mixed_precision": "float32",
                "tree_packing": "off" if tree == "off" else "on",
                "optim": {"lr": 1e-6},
            },
            "num_threads": 1,
            **extra,
        }
        results[tree] = tree_step(cfg, records, steps=1, threads=1)
    off, on = results["off"]["tokens"], results["on"]["tokens"]
    assert off == {"ref_flat": 2 * width, "ref_run": 2 * width, "update_flat": 2 * width, "update_run": 2 * width}
    assert on == {
        "ref_flat": 2 * width,
        "ref_run": tree_size(rows),
        "update_flat": 2 * width,
        "update_run": tree_size(rows),
    }
    assert tree_size(rows) < sum(len(r) for r in rows)  # both prompts open with "Find a"
    assert results["path"]["tokens"] == on
    path = pack_rows(data.batch["input_ids"], data.batch["attention_mask"], long_segment=2).segments
    assert [s.keys is not None and s.mask is None for s in path] == [False, True]  # the "path" run's second segment
    for tree in ("on", "path"):
        diff = (results[tree]["ref_log_prob"] - results["off"]["ref_log_prob"]).abs().max()
        assert float(diff) < 1e-5
        assert results[tree]["pg_loss"] == pytest.approx(results["off"]["pg_loss"], abs=1e-6)
