"""LoRA (`verl.utils.lora`): only adapters train, merged weights equal base + adapter, the reference is the base
exactly, checkpoints round-trip, config errors, and SFT with LoRA saves a merged folder."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from script_modules import load_script, warm_start_args
from transformers import AutoModelForCausalLM

from verl.utils.batch import packed_proto
from verl.utils.fsdp_utils import build_optimizer, build_scheduler
from verl.utils.lora import LoRALinear, adapter_state_dict, apply_lora, lora_disabled, merged_state_dict
from verl.utils.typed_config import ConfigError, from_dict
from verl.workers.actor import PPOActor
from verl.workers.config import ActorConfig, ActorRolloutRefConfig, OptimConfig
from verl.workers.fsdp_workers import ActorRolloutRefWorker

pytestmark = pytest.mark.in_process_engine

REPO = Path(__file__).resolve().parents[2]
PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}
LLAMA = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LINEARS = sorted(LLAMA)  # the tiny Llama's untied linear layers (lm_head is tied to the embeddings)


def lora_model(path: str, rank: int = 4, alpha: float = 8.0, targets: list[str] = LLAMA) -> torch.nn.Module:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    apply_lora(model, rank, alpha, targets)
    return model


def lora_actor(path: str) -> PPOActor:
    module = lora_model(path)
    cfg = ActorConfig(
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=2,
        use_dynamic_bsz=False,
        mixed_precision="float32",
        shuffle=False,
        ppo_epochs=2,
        optim=OptimConfig(lr=1e-3, weight_decay=0.0),
    )
    opt = build_optimizer(module, cfg.optim)
    return PPOActor(module, opt, build_scheduler(opt, cfg.optim), cfg, "cpu", "float32")


def batch():
    d = packed_proto(
        [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]], [[11, 12, 13, 14], [15], [16, 17, 18], [19, 20]], pad_id=2
    )
    d.batch["advantages"] = torch.ones_like(d.batch["response_mask"], dtype=torch.float32) * d.batch["response_mask"]
    d.meta_info.update(PLAIN)
    return d


def updated(actor: PPOActor) -> PPOActor:
    data = batch()
    data.batch["old_log_probs"] = actor.compute_log_prob(data, PLAIN, False, 4, None)["log_probs"]
    actor.update_policy(data, PLAIN)
    return actor


def logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


IDS = torch.tensor([[5, 17, 300, 42, 7, 9, 1000, 3]])


# ----------------------------------------------------------------------------- the module


def test_apply_lora_wraps_every_attention_and_mlp_linear_and_freezes_the_rest(tiny_model_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    names = apply_lora(model, 4, 8.0, LLAMA)
    assert len(names) == 14 and names[:2] == ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"]
    q = model.model.layers[0].self_attn.q_proj
    assert isinstance(q, LoRALinear) and q.scale == 2.0
    assert (q.lora_A.shape, q.lora_B.shape) == ((4, 128), (128, 4)) and torch.equal(q.lora_B, torch.zeros(128, 4))
    assert q.lora_A.abs().max() <= 1 / 128**0.5  # Kaiming-uniform with a = sqrt(5): U(-1/sqrt(in), 1/sqrt(in))
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    assert trainable == sorted(f"{n}.{k}" for n in names for k in ("lora_A", "lora_B"))
    assert "model.layers.0.self_attn.q_proj.weight" in model.state_dict()  # the base weight keeps its Hugging Face name


def test_only_adapter_parameters_change_in_an_actor_update(tiny_model_path):
    actor = lora_actor(tiny_model_path)
    assert (
        sum(len(g["params"]) for g in actor.optimizer.param_groups) == 28
    )  # 2 layers x 7 projections x (A, B): the optimiser gets adapters only
    before = {n: p.detach().clone() for n, p in actor.module.named_parameters()}
    updated(actor)
    after = dict(actor.module.named_parameters())
    changed = sorted(n for n in before if not torch.equal(before[n], after[n]))
    assert changed == sorted(n for n, p in after.items() if p.requires_grad)  # every A and B moved, nothing else
    assert len(changed) == 28


def test_merged_weights_give_the_adapted_logits(tiny_model_path):
    actor = updated(lora_actor(tiny_model_path))
    merged = merged_state_dict(actor.module)
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    assert sorted(merged) == sorted(plain.state_dict())  # Hugging Face names, no lora_A / lora_B
    base_q = plain.model.layers[0].self_attn.q_proj.weight.detach().clone()
    plain.load_state_dict(merged)
    q = actor.module.model.layers[0].self_attn.q_proj
    torch.testing.assert_close(
        plain.model.layers[0].self_attn.q_proj.weight, base_q + 2.0 * q.lora_B @ q.lora_A, rtol=0, atol=0
    )
    actor.module.eval()
    torch.testing.assert_close(logits(plain, IDS), logits(actor.module, IDS), rtol=0, atol=1e-5)


def test_disabled_adapters_give_the_base_logits_exactly(tiny_model_path):
    actor = updated(lora_actor(tiny_model_path))
    actor.module.eval()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    assert not torch.equal(logits(actor.module, IDS), logits(base, IDS))
    with lora_disabled(actor.module):
        assert torch.equal(logits(actor.module, IDS), logits(base, IDS))
    assert all(
        m.adapters_enabled for m in actor.module.modules() if isinstance(m, LoRALinear)
    )  # back on after the block


# ----------------------------------------------------------------------------- the worker


def worker_config(path: str, **model) -> dict:
    return {
        "model": {"path": path, "lora_rank": 4, "lora_alpha": 8.0, **model},
        "actor": {
            "ppo_mini_batch_size": 4,
            "ppo_micro_batch_size_per_gpu": 2,
            "use_dynamic_bsz": False,
            "mixed_precision": "float32",
            "shuffle": False,
            "optim": {"lr": 1e-2, "weight_decay": 0.0},
        },
        "rollout": {"name": "hf", "dtype": "float32"},
        "num_threads": 1,
    }


@pytest.fixture
def workers():
    """Workers built in this process (one 1-rank process group); shut down at the end."""
    made = []

    def make(cfg: dict, role: str) -> ActorRolloutRefWorker:
        w = ActorRolloutRefWorker(cfg, role=role)
        w.init_model()
        made.append(w)
        return w

    yield make
    for w in made:
        w.shutdown()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_reference_is_the_policy_with_adapters_off_and_kl_starts_at_zero(tiny_model_path, workers, dtype):
    cfg = worker_config(tiny_model_path)
    cfg["actor"]["mixed_precision"] = dtype
    w = workers(cfg, "actor_ref")
    assert w.ref.module is w.actor.module  # one copy of the weights
    data = batch()
    policy = w.compute_log_prob(data).batch["old_log_probs"]
    ref = w.compute_ref_log_prob(data).batch["ref_log_prob"]
    assert torch.equal(
        policy, ref
    )  # B = 0: log-prob difference (and every KL estimate) exactly 0 before the first update
    data.batch["old_log_probs"] = policy
    w.update_actor(data)
    assert torch.equal(w.compute_ref_log_prob(data).batch["ref_log_prob"], ref)  # the reference did not move
    moved = w.compute_log_prob(data).batch["old_log_probs"]
    assert (moved - policy)[data.batch["response_mask"].bool()].min() > 0  # the policy did (positive advantages)


def test_weight_sync_sends_merged_weights(tiny_model_path, workers):
    w = workers(worker_config(tiny_model_path), "actor_rollout")
    data = batch()
    data.batch["old_log_probs"] = w.compute_log_prob(data).batch["old_log_probs"]
    assert w.update_actor(data).meta_info["metrics"]["timing_s/weight_sync"] > 0
    engine = w.rollout.model.state_dict()
    merged = merged_state_dict(w.actor.module)
    assert sorted(engine) == sorted(merged)
    for name, value in merged.items():
        assert torch.equal(engine[name], value), name


@pytest.mark.slow
def test_vllm_serves_the_merged_policy(tiny_model_path, workers):
    import numpy as np

    from verl.protocol import DataProto

    cfg = worker_config(tiny_model_path)
    cfg["rollout"] = {"name": "vllm", "dtype": "float32", "kv_cache_gb": 1, "max_model_len": 512}
    w = workers(cfg, "actor_rollout")
    prompts = [[1, 2, 3, 4], [5, 6, 7], [100, 200, 300, 400, 500]]

    def greedy() -> tuple[list[list[int]], list[list[float]]]:
        out = w.generate_sequences(
            DataProto.from_dict(
                non_tensors={"prompt_ids": prompts}, meta_info={**PLAIN, "do_sample": False, "max_tokens": 6}
            )
        )
        return [list(r) for r in out.non_tensor_batch["response_ids"]], [
            list(r) for r in out.non_tensor_batch["response_log_probs"]
        ]

    _, before = greedy()
    data = batch()
    data.batch["old_log_probs"] = w.compute_log_prob(data).batch["old_log_probs"]
    w.update_actor(data)
    ids, after = greedy()
    assert after != before  # the engine serves the new weights
    check = packed_proto(prompts, ids, pad_id=2)
    check.meta_info.update(PLAIN)
    trainer = w.compute_log_prob(check).batch["old_log_probs"]  # the LoRA module's own log-probs of the engine's tokens
    for row, lps in enumerate(after):
        np.testing.assert_allclose(trainer[row, : len(lps)].numpy(), lps, atol=1e-3)


def test_checkpoint_round_trip_restores_adapters_and_optimizer(tiny_model_path, workers, tmp_path):
    cfg = worker_config(tiny_model_path)
    first = workers(cfg, "actor")
    data = batch()
    data.batch["old_log_probs"] = first.compute_log_prob(data).batch["old_log_probs"]
    first.update_actor(data)
    first.save_checkpoint(str(tmp_path / "ckpt"))
    saved = torch.load(tmp_path / "ckpt" / "actor.pt", weights_only=False)
    adapters = adapter_state_dict(first.actor.module)
    assert (
        sorted(saved["model"]) == sorted(adapters) and len(adapters) == 28
    )  # the adapters only: the base is model.path's
    assert len(saved["optimizer"]["state"]) == 28

    second = workers(cfg, "actor")
    second.load_checkpoint(str(tmp_path / "ckpt"))
    for name, value in adapter_state_dict(second.actor.module).items():
        assert torch.equal(value, adapters[name]), name
    a, b = first.actor.optimizer.state_dict(), second.actor.optimizer.state_dict()
    groups = [
        [{**g, "betas": tuple(g["betas"])} for g in sd["param_groups"]] for sd in (a, b)
    ]  # loading gives betas as a list
    assert groups[0] == groups[1] and a["state"].keys() == b["state"].keys()
    for pid, state in a["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(b["state"][pid][key])), (pid, key)
    assert first.actor.scheduler.state_dict() == second.actor.scheduler.state_dict()
    for w in (first, second):  # the same next update from both: the resume is exact
        w.update_actor(data)
    for name, value in adapter_state_dict(first.actor.module).items():
        assert torch.equal(value, adapter_state_dict(second.actor.module)[name]), name

    # the checkpoint's Hugging Face export holds the merged weights; the export command writes the same folder
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "ckpt" / "huggingface"), dtype=torch.float32)
    exported = load_file(str(tmp_path / "ckpt" / "huggingface" / "model.safetensors"))
    proc = subprocess.run(
        [sys.executable, "-m", "verl.utils.lora", "export", str(tmp_path / "ckpt"), str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == str(tmp_path / "out")
    again = load_file(str(tmp_path / "out" / "model.safetensors"))
    assert sorted(again) == sorted(exported) and all(torch.equal(again[k], exported[k]) for k in exported)
    restored = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    apply_lora(restored, 4, 8.0, LLAMA)
    restored.load_state_dict(saved["model"], strict=False)
    torch.testing.assert_close(logits(hf, IDS), logits(restored, IDS), rtol=0, atol=1e-5)


@pytest.mark.parametrize("rank", [0, 4])
def test_a_checkpoint_before_the_first_update_keeps_adam_at_step_zero(tiny_model_path, workers, tmp_path, rank):
    """Saving before any update writes no optimiser state and leaves the live one empty (asking torch for it would
    run a zero-gradient step: AdamW's step count 1, the first real update bias-corrected as the second). Loading it
    into an optimiser that has stepped starts that one afresh."""
    w = workers(worker_config(tiny_model_path, lora_rank=rank), "actor")
    w.save_checkpoint(str(tmp_path / "ckpt"), hf_export=False)
    assert torch.load(tmp_path / "ckpt" / "actor.pt", weights_only=False)["optimizer"] is None
    assert not w.actor.optimizer.state
    data = batch()
    data.batch["old_log_probs"] = w.compute_log_prob(data).batch["old_log_probs"]
    w.update_actor(data)  # 4 rows, mini-batch 4: one optimiser step
    assert {float(s["step"]) for s in w.actor.optimizer.state.values()} == {1.0}
    once = {n: p.detach().clone() for n, p in w.actor.module.named_parameters()}
    w.load_checkpoint(str(tmp_path / "ckpt"))
    assert not w.actor.optimizer.state
    w.update_actor(data)  # the same first update again, from the same start
    assert {float(s["step"]) for s in w.actor.optimizer.state.values()} == {1.0}
    for name, value in w.actor.module.named_parameters():
        assert torch.equal(value, once[name]), name


def test_a_checkpoint_of_another_lora_setting_is_refused(tiny_model_path, workers, tmp_path):
    workers(worker_config(tiny_model_path), "actor").save_checkpoint(str(tmp_path / "ckpt"), hf_export=False)
    full = workers(worker_config(tiny_model_path, lora_rank=0), "actor")
    with pytest.raises(ValueError) as err:
        full.load_checkpoint(str(tmp_path / "ckpt"))
    assert str(err.value) == (
        f"{tmp_path / 'ckpt'} was saved with LoRA rank 4, alpha 8.0 on {LLAMA}, but this run has full fine-tuning "
        "(actor_rollout_ref.model.lora_rank, lora_alpha, target_modules)"
    )


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "model, message",
    [
        ({"lora_rank": -1}, "actor_rollout_ref.model.lora_rank must be >= 0 (0: full fine-tuning), got -1"),
        ({"lora_rank": 8, "lora_alpha": 0}, "actor_rollout_ref.model.lora_alpha must be > 0, got 0.0"),
        (
            {"lora_rank": 8, "target_modules": []},
            "actor_rollout_ref.model.target_modules is empty: LoRA (lora_rank=8) needs at least one linear layer name",
        ),
    ],
)
def test_bad_lora_values_fail_with_one_message(model, message):
    with pytest.raises(ConfigError) as err:
        from_dict(ActorRolloutRefConfig, {"model": {"path": "m", **model}}, "actor_rollout_ref")
    assert str(err.value) == message


def test_lora_defaults_are_off_with_alpha_16_on_every_llama_linear():
    from omegaconf import OmegaConf

    from verl.utils.yaml_defaults import CONFIG_DIR

    m = from_dict(ActorRolloutRefConfig, {"model": {"path": "m"}}, "actor_rollout_ref").model
    assert (m.lora_rank, m.lora_alpha, m.target_modules) == (0, 16.0, LLAMA)
    sft = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "sft_trainer.yaml").model)  # the SFT YAML says the same
    assert (sft["lora_rank"], sft["lora_alpha"], sft["target_modules"]) == (0, 16.0, LLAMA)


def test_an_unknown_module_name_and_lora_on_the_critic_fail_at_start_up(tiny_model_path):
    from verl.trainer.ppo.config import load_config

    with pytest.raises(ConfigError) as err:
        load_config(
            [
                f"actor_rollout_ref.model.path={tiny_model_path}",
                "actor_rollout_ref.model.lora_rank=8",
                "actor_rollout_ref.model.target_modules=[q_proj,qkv_proj]",
            ]
        )
    assert str(err.value) == (
        "actor_rollout_ref.model.target_modules ['qkv_proj'] match no linear layer of the model; "
        f"its linear layers: {LINEARS}"
    )
    with pytest.raises(ConfigError) as err:  # LoRA trains the policy only: the critic's model has no LoRA keys
        load_config(["actor_rollout_ref.model.path=m", "critic.model.lora_rank=8"], check_files=False)
    assert str(err.value) == (
        "bad override: Key 'lora_rank' is not in struct\n    full_key: critic.model.lora_rank\n    object_type=dict"
    )


def test_sft_checks_the_module_names_too(tiny_model_path, tmp_path):
    from verl.trainer.main_sft import load_sft_config

    data = tmp_path / "d.parquet"
    data.write_bytes(b"")
    with pytest.raises(ConfigError) as err:
        load_sft_config(
            [
                f"model.path={tiny_model_path}",
                f"data.train_files={data}",
                f"data.val_files={data}",
                "model.lora_rank=4",
                "model.target_modules=[c_attn]",
            ]
        )
    assert (
        str(err.value)
        == f"sft.model.target_modules ['c_attn'] match no linear layer of the model; its linear layers: {LINEARS}"
    )


def test_a_lora_override_changes_the_warm_start_key(tmp_path):
    warm_start = load_script("warm_start")
    (tmp_path / "config.json").write_text("{}")
    args, lora = warm_start_args(env_name="maze"), warm_start_args(env_name="maze", sft_overrides=["model.lora_rank=8"])
    assert warm_start.cache_key(args, tmp_path, "float32") != warm_start.cache_key(lora, tmp_path, "float32")


def test_the_warm_start_key_holds_the_dtype_sft_resolves_to(tiny_model_path, tmp_path):
    """``mixed_precision: auto`` is resolved as SFT resolves it (here: the probe's or the flags' choice) from the one
    composed SFT config, and a warm start trained in the other dtype has another key."""
    from verl.utils.precision import resolve_dtype

    warm_start = load_script("warm_start")
    here = resolve_dtype("auto", "cpu", "train").dtype
    other = "bfloat16" if here == "float32" else "float32"
    limits = warm_start.agent_limits([])
    assert warm_start.sft_dtype(warm_start.sft_config(tiny_model_path, [], limits, ["maze"])) == here
    assert (
        warm_start.sft_dtype(
            warm_start.sft_config(
                tiny_model_path, [f"train.mixed_precision={other}", "train.epochs=1"], limits, ["maze"]
            )
        )
        == other
    )
    (tmp_path / "config.json").write_text("{}")
    args = warm_start_args(env_name="maze")
    assert warm_start.cache_key(args, tmp_path, here) != warm_start.cache_key(args, tmp_path, other)


# ----------------------------------------------------------------------------- SFT


def test_sft_with_lora_saves_a_merged_folder_with_the_trained_logits(tiny_model_path, tmp_path):
    from test_sft import fixed_samples

    from verl.trainer.main_sft import load_sft_config
    from verl.trainer.sft_trainer import SFTTrainer

    data = fixed_samples(tmp_path / "train.parquet")
    cfg = load_sft_config(
        [
            f"model.path={tiny_model_path}",
            f"data.train_files={data}",
            f"data.val_files={data}",
            "train.batch_size=4",
            "train.micro_batch_size=2",
            "train.epochs=1",
            "optim.lr=3e-3",
            "trainer.num_threads=1",
            "train.mixed_precision=float32",
            "trainer.logger=[jsonl]",
            f"trainer.output_dir={tmp_path / 'sft'}",
            "model.lora_rank=4",
            "model.lora_alpha=8",
        ]
    )
    trainer = SFTTrainer(cfg)
    try:
        summary = trainer.fit()
    finally:
        trainer.leave_distributed()
    assert (summary["best_step"], summary["steps"]) == (2, 2)  # the folder holds the final weights
    module = trainer.model.module.eval()
    folder = tmp_path / "sft" / "huggingface"
    saved = load_file(str(folder / "model.safetensors"))
    assert not any("lora" in k for k in saved)
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    torch.testing.assert_close(logits(hf, IDS), logits(module, IDS), rtol=0, atol=1e-5)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    assert torch.equal(
        hf.model.embed_tokens.weight, base.model.embed_tokens.weight
    )  # untargeted weights are the base's
    assert not torch.equal(hf.model.layers[0].self_attn.q_proj.weight, base.model.layers[0].self_attn.q_proj.weight)
