"""The policy worker's CUDA path, checked on one GPU:
nccl, bf16 autocast, HF rollout, updates, LoRA, FSDP2, checkpoints.

    python scripts/gpu_check.py --model DIR          # a Hugging Face causal LM folder
    python scripts/gpu_check.py --shape_of DIR       # a randomly initialised model with DIR's config and tokenizer

It runs the worker the trainer starts (`ActorRolloutRefWorker`, world size 1, no Ray) with
``device: cuda`` and every dtype on ``auto``, and checks:

1. the process group is nccl, the policy sits on the GPU, ``auto`` chose bf16 (on a bf16 GPU);
2. the HF engine's log-probs of its own greedy tokens agree with the trainer's ``compute_log_prob``;
3. the GPU's bf16 log-probs agree with a plain fp32 forward on the CPU (same weights, same tokens);
4. the reference equals the policy before any update (KL exactly 0), with a separate reference
   model and with LoRA (the policy's module, adapters off);
5. updates with advantage +1 raise the log-probs of every rewarded row; with LoRA only the adapters move;
6. the checkpoint round trip is bit-identical (save, update, load, save), log-probs included;
7. FSDP2 applied on a one-rank CUDA mesh gives the plain module's update;
8. the merged export of a LoRA checkpoint holds ``W + (alpha / r) B A`` and loads as a plain model.

``--tree_only`` runs one other check instead: tree attention (`verl.utils.prefix_tree`) on the GPU.
The recorded WebShop step's rows (``--records``), packed as prefix trees, give every real token the
padded forward's log-prob (fp32 and bf16), with SDPA limited to its fused kernels (flash and
memory-efficient attention, no math fallback); it prints which kernel each kind of segment reaches
and the packed and padded forwards' times.

It prints each check with its numbers, then generation and update tokens/s, and exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_workers, for the recorded batch

from verl.protocol import DataProto  # noqa: E402
from verl.single_controller.base.worker import default_backend  # noqa: E402
from verl.utils import fsdp_utils  # noqa: E402
from verl.utils.batch import packed_proto  # noqa: E402
from verl.workers.fsdp_workers import ActorRolloutRefWorker  # noqa: E402

FAILED: list[str] = []
UPDATE_KEYS = ["input_ids", "attention_mask", "position_ids", "responses", "response_mask", "advantages"]
PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}  # the model's own distribution: every call's sampling
LORA_RANK, LORA_ALPHA = 8, 16.0


def check(name: str, ok: bool, detail: str) -> None:
    print(f"[{'ok' if ok else 'FAILED'}] {name}: {detail}", flush=True)
    if not ok:
        FAILED.append(name)


def random_model(shape_of: str, out: Path) -> str:
    """``shape_of``'s architecture and tokenizer with freshly drawn weights, saved in ``out``."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(shape_of), dtype=torch.float32)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(shape_of).save_pretrained(out)
    return str(out)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def worker_config(model: str, device: str, rows: int, lora_rank: int = 0) -> dict:
    return {
        "model": {"path": model, "lora_rank": lora_rank, "lora_alpha": LORA_ALPHA},
        "actor": {
            "ppo_mini_batch_size": rows,
            "ppo_micro_batch_size_per_gpu": 8,
            "use_dynamic_bsz": False,
            "shuffle": False,
            "optim": {"lr": 1e-4, "weight_decay": 0.0},
        },
        "rollout": {"name": "hf", "max_model_len": 2048},
        "device": device,
    }


def batch(prompts: list[list[int]], responses: list[list[int]], pad_id: int) -> DataProto:
    data = packed_proto(prompts, responses, pad_id=pad_id)
    data.batch["advantages"] = torch.ones_like(data.batch["response_mask"], dtype=torch.float32)
    data.meta_info.update(PLAIN)
    return data


def row_means(log_probs: torch.Tensor, data: DataProto) -> torch.Tensor:
    mask = data.batch["response_mask"].float()
    return (log_probs.float() * mask).sum(1) / mask.sum(1)


def cpu_fp32_log_probs(model: str, data: DataProto) -> torch.Tensor:
    """Log-probs of the response tokens from a plain fp32 forward on the CPU, laid out like ``compute_log_prob``'s."""
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    ids, mask, pos = (data.batch[k] for k in ("input_ids", "attention_mask", "position_ids"))
    with torch.no_grad():
        logits = lm(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float()
    T = data.batch["responses"].shape[1]
    picked = (
        torch.log_softmax(logits[:, -T - 1 : -1], dim=-1).gather(-1, data.batch["responses"].unsqueeze(-1)).squeeze(-1)
    )
    return picked * data.batch["response_mask"]


def merged_by_hand(module: torch.nn.Module, scale: float) -> dict[str, torch.Tensor]:
    """``W + scale * B @ A`` for every adapted layer of ``module`` (fp32, on the CPU), under its weight's name."""
    params = {n: p.detach().float().cpu() for n, p in module.named_parameters()}
    return {
        n[: -len("lora_A")] + "weight": params[n[: -len("lora_A")] + "weight"] + scale * params[n[:-1] + "B"] @ a
        for n, a in params.items()
        if n.endswith("lora_A")
    }


def update(worker: ActorRolloutRefWorker, data: DataProto, steps: int) -> float:
    """``steps`` updates; returns update tokens/s (every position of every row, as the forward sees them)."""
    tokens = int(data.batch["attention_mask"].sum()) * steps
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step = data.select(batch_keys=UPDATE_KEYS, meta_info_keys=list(PLAIN))
        step.meta_info["sync_weights"] = False
        worker.update_actor(step)
    sync()
    return tokens / (time.perf_counter() - start)


def picked_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)[i, targets[i]]`` for each of the ``(M, V)`` rows, in fp32."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def timed(fn, repeats: int = 5) -> tuple[object, float]:
    """``fn()``'s result and its median seconds over ``repeats`` runs after one warm-up."""
    out, times = fn(), []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - start)
    return out, sorted(times)[len(times) // 2]


def tree_check(model: str, device: str, records: str) -> None:
    """Tree attention on ``device``: packed log-probs equal the padded forward's, SDPA's fused kernels only."""
    from bench_workers import recorded_batch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verl.utils.prefix_tree import pack_rows, use_tree_attention

    data = recorded_batch(records, AutoTokenizer.from_pretrained(model), pad_id=0)
    ids, mask, pos = (data.batch[k].to(device) for k in ("input_ids", "attention_mask", "position_ids"))
    tree = pack_rows(ids, mask)
    # every real token but a row's last predicts the row's next real token: (row, column, next column)
    pairs = [(b, c[:-1], c[1:]) for b, c in enumerate(mask.bool().nonzero()[:, 1].split(mask.sum(1).tolist()))]
    rows = torch.cat([torch.full_like(c, b) for b, c, _ in pairs])
    cols, nexts = torch.cat([c for _, c, _ in pairs]), torch.cat([n for _, _, n in pairs])
    targets = ids[rows, nexts]
    with_prefix = sum(seg.keys is not None for seg in tree.segments)
    print(
        f"[info] {records}: {len(data)} rows, {tree.flat_tokens:,} real tokens, tree {tree.tokens:,} "
        f"({len(tree.segments)} segments, {with_prefix} after a shared prefix)",
        flush=True,
    )
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    for dtype, limit in ((torch.float32, 1e-4), (torch.bfloat16, 0.05)):
        lm = AutoModelForCausalLM.from_pretrained(model, dtype=dtype, attn_implementation="sdpa").to(device).eval()
        use_tree_attention(lm)
        with torch.no_grad():
            flat, flat_s = timed(lambda lm=lm: lm(input_ids=ids, attention_mask=mask, position_ids=pos).logits)
            flat = picked_log_probs(flat[rows, cols], targets)
            with sdpa_kernel(fused):
                packed, tree_s = timed(lambda lm=lm: lm(**tree.model_inputs()).logits[0])
            packed = picked_log_probs(packed[tree.index[rows, cols]], targets)
            kernels = {}
            for name, backend in (
                ("flash", SDPBackend.FLASH_ATTENTION),
                ("memory-efficient", SDPBackend.EFFICIENT_ATTENTION),
            ):
                try:
                    with sdpa_kernel([backend]):
                        lm(**tree.model_inputs())
                    kernels[name] = "runs every segment"
                except RuntimeError:
                    kernels[name] = "refuses some segment"
        gap = (packed - flat).abs()
        name = str(dtype).removeprefix("torch.")
        check(
            f"tree attention = padded forward ({name}, SDPA fused kernels only)",
            float(gap.mean() if dtype == torch.bfloat16 else gap.max()) < limit,
            f"log-probs of {len(targets):,} tokens: mean |diff| {gap.mean():.2e}, max {gap.max():.2e}; "
            f"forward {flat_s * 1e3:.1f} ms padded, {tree_s * 1e3:.1f} ms packed ({flat_s / tree_s:.2f}x); "
            + ", ".join(f"{k} alone {v}" for k, v in kernels.items()),
        )
        del lm
        if device == "cuda":
            torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a Hugging Face causal LM folder")
    source.add_argument("--shape_of", help="draw fresh weights for this folder's config (its tokenizer too)")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--prompt_len", type=int, default=512)
    parser.add_argument("--new_tokens", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--device", default="cuda", help="cpu runs the same checks over gloo (a dry run of this script)"
    )
    parser.add_argument("--tree_only", action="store_true", help="check only tree attention on the device (see above)")
    parser.add_argument(
        "--records",
        default="data/bench/webshop_grpo_warmstart_step1.jsonl",
        help="with --tree_only: a rollout JSONL whose trajectories are packed",
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: this script checks the GPU path (--device cpu for a dry run)")
    os.environ.setdefault("WORLD_SIZE", "1")
    work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    model = args.model or random_model(args.shape_of, work / "model")
    print(
        f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'CPU'}, torch {torch.__version__}, model {model}",
        flush=True,
    )
    if args.tree_only:
        tree_check(model, args.device, args.records)
        print(f"\n{'all checks passed' if not FAILED else 'FAILED: ' + ', '.join(FAILED)}")
        sys.exit(1 if FAILED else 0)

    worker = ActorRolloutRefWorker(worker_config(model, args.device, args.prompts), role="actor_rollout_ref")
    worker.init_model()
    dtypes = {role: p.dtype for role, p in worker.precision.items()}
    placed = {p.device.type for p in worker.actor.module.parameters()} == {args.device}
    bf16 = args.device != "cuda" or set(dtypes.values()) == {"bfloat16"}
    check(
        "set-up",
        dist.get_backend() == default_backend(args.device) and placed and bf16,
        f"backend {dist.get_backend()}, policy on {args.device if placed else 'several devices'}, dtypes {dtypes}",
    )

    vocab = worker.actor.module.config.vocab_size
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(100, vocab - 100, (args.prompts, args.prompt_len), generator=g).tolist()
    sync()
    start = time.perf_counter()
    out = worker.generate_sequences(
        DataProto.from_dict(
            non_tensors={"prompt_ids": prompts}, meta_info={**PLAIN, "do_sample": False, "max_tokens": args.new_tokens}
        )
    )
    gen_s = time.perf_counter() - start
    responses = [list(map(int, r)) for r in out.non_tensor_batch["response_ids"]]
    data = batch(prompts, responses, worker.rollout.pad_id)
    mask = data.batch["response_mask"].bool()

    policy = worker.compute_log_prob(data).batch["old_log_probs"]
    engine = torch.zeros_like(policy)
    for row, lps in enumerate(out.non_tensor_batch["response_log_probs"]):
        engine[row, : len(lps)] = torch.tensor(lps)
    gap = (policy - engine)[mask].abs()
    check(
        "engine vs trainer log-probs (greedy tokens)",
        float(gap.mean()) < 0.05,
        f"mean |diff| {gap.mean():.4f}, max {gap.max():.4f} over {int(mask.sum())} tokens",
    )

    cpu = cpu_fp32_log_probs(model, data)
    gap = (policy.cpu().float() - cpu)[mask].abs()
    check(
        "these log-probs vs a plain fp32 forward on the CPU",
        float(gap.mean()) < 0.05,
        f"mean |diff| {gap.mean():.4f}, max {gap.max():.4f}",
    )

    ref = worker.compute_ref_log_prob(data).batch["ref_log_prob"]
    check(
        "reference = policy before an update (separate model)",
        torch.equal(ref, policy),
        "bit-identical" if torch.equal(ref, policy) else f"max |diff| {(ref - policy).abs().max():.2e}",
    )

    worker.update_actor(data.select(batch_keys=UPDATE_KEYS, meta_info_keys=list(PLAIN)))
    plain_one = worker.compute_log_prob(data).batch["old_log_probs"]
    ckpt = work / "full"
    worker.save_checkpoint(str(ckpt / "a"), hf_export=False)  # after a step: Adam's moments are in it
    upd_tps = update(worker, data, args.steps)
    after = worker.compute_log_prob(data).batch["old_log_probs"]
    rise = row_means(after, data) - row_means(policy, data)
    check(
        f"{1 + args.steps} updates raise every rewarded row",
        bool((rise > 0).all()),
        f"mean log-prob rise per row {float(rise.min()):.3f} to {float(rise.max()):.3f}",
    )
    worker.load_checkpoint(str(ckpt / "a"))
    worker.save_checkpoint(str(ckpt / "b"), hf_export=False)
    a, b = (torch.load(ckpt / x / "actor.pt", weights_only=False) for x in ("a", "b"))
    same = all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]) and a["scheduler"] == b["scheduler"]
    same = same and all(
        torch.equal(torch.as_tensor(v), torch.as_tensor(b["optimizer"]["state"][pid][k]))
        for pid, st in a["optimizer"]["state"].items()
        for k, v in st.items()
    )
    reloaded = worker.compute_log_prob(data).batch["old_log_probs"]
    same_lp = torch.equal(reloaded, plain_one)
    check(
        "checkpoint round trip (save, update, load, save)",
        same and same_lp,
        f"weights, optimiser and scheduler {'bit-identical' if same else 'differ'}; log-probs after the load "
        + ("bit-identical" if same_lp else f"differ by up to {(reloaded - plain_one).abs().max():.2e}"),
    )
    worker.shutdown()
    del worker
    if args.device == "cuda":
        torch.cuda.empty_cache()

    # FSDP2 on a one-rank CUDA mesh: the trainer shards only over several ranks, so force it here
    unsharded = fsdp_utils.shard_module
    fsdp_utils.shard_module = lambda module, device: fsdp_utils.apply_fsdp2(module, device)
    try:
        sharded = ActorRolloutRefWorker(worker_config(model, args.device, args.prompts), role="actor")
        sharded.init_model()
        is_fsdp = type(sharded.actor.module).__name__.startswith("FSDP")
        first = sharded.compute_log_prob(data).batch["old_log_probs"]
        sharded.update_actor(data.select(batch_keys=UPDATE_KEYS, meta_info_keys=list(PLAIN)))
        fsdp_one = sharded.compute_log_prob(data).batch["old_log_probs"]
        gap0, gap1 = (first - policy)[mask].abs(), (fsdp_one - plain_one)[mask].abs()
        check(
            "FSDP2 on a one-rank mesh = the plain module",
            is_fsdp and float(gap0.mean()) < 1e-3 and float(gap1.mean()) < 1e-2,
            f"{type(sharded.actor.module).__name__}; mean |diff| before {gap0.mean():.1e} (max {gap0.max():.1e}), "
            f"after one update {gap1.mean():.1e} (max {gap1.max():.1e})",
        )
        sharded.shutdown()
        del sharded
    finally:
        fsdp_utils.shard_module = unsharded
    if args.device == "cuda":
        torch.cuda.empty_cache()

    lora = ActorRolloutRefWorker(worker_config(model, args.device, args.prompts, lora_rank=LORA_RANK), role="actor_ref")
    lora.init_model()
    lp = lora.compute_log_prob(data).batch["old_log_probs"]
    ref = lora.compute_ref_log_prob(data).batch["ref_log_prob"]
    check(
        "LoRA: reference (adapters off) = policy before an update",
        torch.equal(ref, lp),
        "bit-identical" if torch.equal(ref, lp) else f"max |diff| {(ref - lp).abs().max():.2e}",
    )
    base = {n: p.detach().clone() for n, p in lora.actor.module.named_parameters() if not p.requires_grad}
    lora_tps = update(lora, data, args.steps)
    moved_base = [n for n, p in lora.actor.module.named_parameters() if n in base and not torch.equal(p, base[n])]
    lp_after = lora.compute_log_prob(data).batch["old_log_probs"]
    rise = row_means(lp_after, data) - row_means(lp, data)
    check(
        "LoRA: updates move the adapters only and raise every row",
        not moved_base and bool((rise > 0).all()),
        f"{len(base)} frozen tensors, {len(moved_base)} moved; "
        f"rise per row {float(rise.min()):.3f} to {float(rise.max()):.3f}",
    )
    lora.save_checkpoint(str(work / "lora"))
    expected = merged_by_hand(lora.actor.module, LORA_ALPHA / LORA_RANK)
    lora.shutdown()
    del lora
    if args.device == "cuda":
        torch.cuda.empty_cache()
    merged = ActorRolloutRefWorker(
        worker_config(str(work / "lora" / "huggingface"), args.device, args.prompts), role="actor"
    )
    merged.init_model()
    from safetensors.torch import load_file

    exported = load_file(str(work / "lora" / "huggingface" / "model.safetensors"))
    worst = max(float((exported[k].float() - v).abs().max()) for k, v in expected.items())
    check(
        "LoRA: the merged export holds W + (alpha/r) B A",
        exported.keys() >= expected.keys() and worst < 1e-5,
        f"{len(expected)} tensors, max |diff| {worst:.1e}",
    )
    gap = (merged.compute_log_prob(data).batch["old_log_probs"] - lp_after)[mask].abs()
    print(
        f"[info] the merged model's log-probs vs the LoRA policy's: mean |diff| {gap.mean():.4f}, max {gap.max():.4f} "
        f"({dtypes['actor']} compute: the merged weights are rounded to it as one, the LoRA path keeps B A apart)",
        flush=True,
    )
    merged.shutdown()

    gen_tokens = sum(len(r) for r in responses)
    print(
        f"\ngeneration (HF engine, greedy, {args.prompts} x {args.prompt_len}-token prompts): "
        f"{gen_tokens / gen_s:.0f} new tokens/s"
    )
    print(
        f"update_actor, full fine-tuning: {upd_tps:.0f} tokens/s; LoRA rank {LORA_RANK}: {lora_tps:.0f} tokens/s "
        f"({lora_tps / upd_tps:.2f}x)"
        + (f"; peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if args.device == "cuda" else "")
    )
    print(f"\n{'all checks passed' if not FAILED else 'FAILED: ' + ', '.join(FAILED)}")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
