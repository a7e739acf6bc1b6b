"""SFT: the loss mask by hand, the loss falls on a fixed set,
and the output loads into the rollout engine and the actor."""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from trainer_runs import run_entry

from verl.trainer.main_sft import load_sft_config
from verl.trainer.sft_trainer import MASK_KEY, fit_batch, pack_samples, read_samples
from verl.utils.typed_config import ConfigError

pytestmark = pytest.mark.in_process_engine


def test_two_turn_sample_learns_exactly_the_model_turns():
    # prompt (2 tokens), model turn 1 (2), observation (2), model turn 2 (1), padding in the shorter row
    ids = [[11, 12, 21, 22, 31, 32, 41], [11, 21]]
    masks = [[0, 0, 1, 1, 0, 0, 1], [0, 1]]
    d = pack_samples(ids, masks, pad_id=0)
    assert d.batch["input_ids"].tolist() == [[11, 12, 21, 22, 31, 32, 41], [11, 21, 0, 0, 0, 0, 0]]
    assert d.batch["attention_mask"].tolist() == [[1] * 7, [1, 1, 0, 0, 0, 0, 0]]
    # position t predicts token t + 1: learned where the NEXT token is a model token (21, 22 and 41; 21 in row 2)
    assert d.batch[MASK_KEY].tolist() == [[0, 1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0, 0]]


def test_read_samples_checks_columns_and_drops_long_ones(tmp_path):
    pd.DataFrame({"input_ids": [[1, 2, 3], [1, 2, 3, 4, 5]], "loss_mask": [[0, 1, 1], [0, 0, 1, 1, 1]]}).to_parquet(
        tmp_path / "s.parquet"
    )
    ids, masks, dropped = read_samples(str(tmp_path / "s.parquet"), max_length=4)
    assert (ids, masks, dropped) == ([[1, 2, 3]], [[0, 1, 1]], 1)
    pd.DataFrame({"input_ids": [[1, 2]], "loss_mask": [[0]]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="row 0: 2 input ids but 1 loss-mask entries"):
        read_samples(str(tmp_path / "bad.parquet"), 8)


def fixed_samples(path: Path, n: int = 8, seed: int = 0) -> Path:
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        prompt = torch.randint(100, 2000, (12,), generator=g).tolist()
        reply = [7, 8, 9, 10, 11, 12, 2]  # the same reply every time: learnable
        rows.append({"input_ids": prompt + reply, "loss_mask": [0] * len(prompt) + [1] * len(reply)})
    pd.DataFrame(rows).to_parquet(path)
    return path


def run_sft(tiny_model_path, tmp_path, *extra):
    data = fixed_samples(tmp_path / "train.parquet")
    out = tmp_path / "sft"
    args = [
        f"model.path={tiny_model_path}",
        f"data.train_files={data}",
        f"data.val_files={data}",
        "train.batch_size=4",
        "train.micro_batch_size=2",
        "train.epochs=3",
        "optim.lr=3e-3",
        "train.patience=5",
        "trainer.num_threads=1",
        f"trainer.output_dir={out}",
        *extra,
    ]
    return run_entry("main_sft", args, timeout_s=600), out


@pytest.mark.parametrize("samples, world_size, batch_size", [(4, 1, 4), (25, 2, 4), (3, 1, 3), (3, 2, 2)])
def test_fewer_samples_than_a_batch_make_one_step_over_all_of_them(
    tiny_model_path, samples, world_size, batch_size, capsys
):
    t = load_sft_config([f"model.path={tiny_model_path}"], check_files=False).train  # train.batch_size=4
    assert fit_batch(t, samples, world_size).batch_size == batch_size
    said = capsys.readouterr().out
    assert said == (
        ""
        if samples >= 4
        else f"[sft] {samples} training samples, fewer than train.batch_size=4: "
        f"each epoch is one step over {batch_size}\n"
    )


def test_too_few_samples_for_the_ranks_is_a_config_error(tiny_model_path):
    t = load_sft_config([f"model.path={tiny_model_path}"], check_files=False).train
    with pytest.raises(ConfigError, match=r"^1 training sample\(s\) cannot be split over 2 ranks$"):
        fit_batch(t, 1, 2)


def test_loss_falls_on_a_fixed_set_and_the_best_weights_are_kept(tiny_model_path, tmp_path):
    proc, out = run_sft(tiny_model_path, tmp_path, "train.eval_before_train=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out / "huggingface")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    dev = [(r["step"], r["sft/dev_loss"]) for r in rows if "sft/dev_loss" in r]
    assert [s for s, _ in dev] == [0, 2, 4, 6]  # the base model, then after each epoch of 2 steps
    losses = [v for _, v in dev]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.8 * losses[0]  # 10.8 -> 7.4 measured
    summary = json.loads((out / "sft_summary.json").read_text())
    assert summary["best_dev_loss"] == pytest.approx(min(v for _, v in dev)) and summary["steps"] == 6
    assert (out / "huggingface" / "model.safetensors").is_file() and (out / "metrics.png").read_bytes()[
        :4
    ] == b"\x89PNG"


def test_bad_config_fails_before_any_work(tiny_model_path, tmp_path):
    proc, _ = run_sft(tiny_model_path, tmp_path, "data.val_files=/nope.parquet")
    assert proc.returncode == 2
    assert (
        "config error: sft.data.val_files='/nope.parquet' does not exist (run scripts/make_sft_data.py)" in proc.stderr
    )


@pytest.mark.slow
def test_sft_output_loads_into_the_vllm_rollout_and_the_actor(tiny_model_path, tmp_path):
    from verl.protocol import DataProto
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    proc, out = run_sft(tiny_model_path, tmp_path, "train.epochs=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = str(out / "huggingface")
    worker = ActorRolloutRefWorker(
        {
            "model": {"path": folder},
            "actor": {"mixed_precision": "float32"},
            "rollout": {"name": "vllm", "dtype": "float32", "kv_cache_gb": 1, "max_model_len": 256},
            "num_threads": 1,
        },
        role="actor_rollout",
    )
    worker.init_model()
    try:
        prompt = [101, 202, 303]
        reply = worker.generate_sequences(
            DataProto.from_dict(
                non_tensors={"prompt_ids": [prompt]},
                meta_info={"temperature": 1.0, "top_p": 1.0, "top_k": -1, "do_sample": False, "max_tokens": 7},
            )
        )
        ids = list(reply.non_tensor_batch["response_ids"][0])
        assert 1 <= len(ids) <= 7
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        greedy = hf.generate(torch.tensor([prompt]), max_new_tokens=len(ids), do_sample=False)[0, 3:].tolist()
        assert greedy[: len(ids)] == ids  # the engine serves exactly the SFT weights
        actor_weights = dict(worker.actor.module.state_dict())
        assert torch.equal(
            actor_weights["model.embed_tokens.weight"].full_tensor()
            if hasattr(actor_weights["model.embed_tokens.weight"], "full_tensor")
            else actor_weights["model.embed_tokens.weight"],
            hf.model.embed_tokens.weight,
        )
    finally:
        worker.shutdown()


def test_nll_on_learned_positions_only_equals_the_full_computation(tiny_model_path):
    from transformers import AutoModelForCausalLM

    from verl.trainer.sft_trainer import token_nll

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    d = pack_samples([[11, 12, 21, 22, 31, 32, 41], [11, 21, 5]], [[0, 0, 1, 1, 0, 0, 1], [0, 1, 1]], pad_id=0)
    nll, tokens = token_nll(model, d, "cpu", "float32")
    chunked, _ = token_nll(model, d, "cpu", "float32", chunk_tokens=2)  # 5 learned tokens, 2 at a time
    # learned: row 0 predicts at positions 1, 2, 5; row 1 at 0, 1
    assert tokens.tolist() == [3.0, 2.0]
    full = model(
        input_ids=d.batch["input_ids"], attention_mask=d.batch["attention_mask"], position_ids=d.batch["position_ids"]
    ).logits
    logp = full.log_softmax(-1)
    for row, positions in ((0, [1, 2, 5]), (1, [0, 1])):
        expected = -sum(logp[row, t, int(d.batch["input_ids"][row, t + 1])] for t in positions)
        assert nll[row].item() == pytest.approx(expected.item(), abs=1e-5)
        assert chunked[row].item() == pytest.approx(expected.item(), abs=1e-5)
