"""Worker benchmark: rollout engines, training overhead and weight sync, measured side by side in one run.

    python scripts/bench_workers.py                       # SmolLM2-135M-Instruct (prepared once)
    python scripts/bench_workers.py --model DIR --prompts 32 --new_tokens 64 --train_rows 8 --train_len 256
    python scripts/bench_workers.py --lora_only --lora_rank 8   # only the full-vs-LoRA training row (a few minutes)
    python scripts/bench_workers.py --levers                    # only the step levers on the recorded WebShop step
    python scripts/bench_workers.py --overhead_only             # only update_actor vs the bare loop, per precision
    python scripts/bench_workers.py --tree                      # only tree packing against the flat path, recorded step
    python scripts/bench_workers.py --tree --device cuda --model DIR   # the same on a GPU (peak GPU memory for RSS)

Prints:
  * rollout tokens/s of the vLLM engine and of the HF ``generate`` engine on
    the same prompts and sampling settings, and their ratio;
  * training tokens/s of ``update_actor`` (FSDP2 wrapper, PPO loss, micro-batch
    loop, grad clip, scheduler) against a bare PyTorch loop (forward, the same
    token-mean policy loss, backward, AdamW) on the same model and tokens; the
    ratio is the engine's overhead (1.0 = none);
  * the same two on a real multi-turn batch (``--records``, by default one real
    WebShop GRPO step in ``data/bench``, re-tokenised from its text): rows of different lengths with
    observation tokens between the model's turns. The bare loop pads every
    micro-batch of ``--micro_rows`` rows to the batch width and projects every
    position onto the vocabulary; ``update_actor`` groups rows by length under
    its token budget and sends only the learned tokens through the LM head;
  * current and peak RSS of the worker (GiB) after the updates;
  * seconds to push the policy's weights into the live vLLM engine;
  * the two precisions side by side on this machine: vLLM rollout and bare
    training tokens/s in fp32 and bf16, so a user sees what ``--dtype auto``
    (the trainer's default) chose and what it bought;
  * full fine-tuning against LoRA (``--lora_rank``, ``--lora_alpha``, Llama's
    attention and MLP layers): ``update_actor`` tokens/s on the same equal-rows
    batch and the peak RSS of the process, each in a fresh process holding an
    actor and a reference (``role=actor_ref``; with LoRA the reference is the
    policy's module with its adapters off), and the LoRA / full ratios;
  * ``--levers``: the training half of a learning-run step on the recorded WebShop step (the
    reference pass for the KL loss, then one update whose old log-probs are its own), full or LoRA,
    gradient checkpointing on or off, each in a fresh process: seconds of each part, tokens/s and
    peak RSS, against today's setting (full, checkpointing on);
  * ``--tree``: the training half of a learning-run step on the recorded WebShop step (the trainer's own
    defaults: gradient checkpointing, token budgets) with ``tree_packing`` off, on with every prefixed
    segment masked (``masked``: no segment run causally over its path), and on, each in a fresh
    process: tokens through the model (the flat path's padding included), seconds of the reference pass
    and the update, peak RSS, and how far the tree's reference log-probs, loss and gradient norm are from
    the flat path's; ``--update_budget`` adds rows at another ``ppo_max_token_len_per_gpu``; ``--device cuda``
    runs it on a GPU (the peak column is then the process's peak GPU memory);
  * ``--overhead_only``: ``update_actor`` (an actor worker without an engine) against the bare loop
    on the equal-rows batch, in ``--dtype``'s precision and (unless ``--no_precision_compare``) the
    other one, each precision in a fresh process.
Everything else runs in this process (world size 1), with ``--threads`` torch threads.
The header names the CPU, its native-bf16 flags, the thread count and the dtype.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import torch

PLAIN = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}  # the model's own distribution: what every call samples


def best_rate(run) -> float:
    """Tokens/s of ``run()`` (which returns a token count): best of two after a warm-up call."""
    run()  # warm-up: first calls pay one-off kernel and allocator costs
    rates = []
    for _ in range(2):
        start = time.perf_counter()
        tokens = run()
        rates.append(tokens / (time.perf_counter() - start))
    return max(rates)


def sampling(prompts, new_tokens):
    from verl.workers.rollout.base import SamplingParams

    return [SamplingParams(**PLAIN, max_tokens=new_tokens, seed=i) for i in range(len(prompts))]


def rollout_bench(worker, hf_engine, prompts, new_tokens):
    from verl.protocol import DataProto

    params = sampling(prompts, new_tokens)
    data = DataProto.from_dict(
        non_tensors={"prompt_ids": prompts, "seed": list(range(len(prompts)))},
        meta_info={**PLAIN, "max_tokens": new_tokens},
    )
    vllm_rate = best_rate(lambda: sum(len(r) for r in worker.generate_sequences(data).non_tensor_batch["response_ids"]))
    hf_rate = best_rate(lambda: sum(len(o.token_ids) for o in hf_engine.generate(prompts, params)))
    return vllm_rate, hf_rate


def vllm_rate_in(dtype, model, rollout_cfg, prompts, new_tokens, threads):
    """vLLM rollout tokens/s with the engine built in ``dtype``."""
    from verl.workers.config import RolloutConfig
    from verl.workers.rollout.vllm_rollout import VLLMRollout

    engine = VLLMRollout(model, RolloutConfig(**rollout_cfg), num_threads=threads, dtype=dtype)
    try:
        params = sampling(prompts, new_tokens)
        return best_rate(lambda: sum(len(o.token_ids) for o in engine.generate(prompts, params)))
    finally:
        engine.shutdown()


def training_batch(rows, length, vocab, seed=0):
    from verl.utils.batch import packed_proto

    g = torch.Generator().manual_seed(seed)
    prompt_len = length // 4
    prompts = torch.randint(100, vocab - 100, (rows, prompt_len), generator=g).tolist()
    responses = torch.randint(100, vocab - 100, (rows, length - prompt_len), generator=g).tolist()
    d = packed_proto(prompts, responses, pad_id=0)
    d.batch["advantages"] = torch.randn(d.batch["responses"].shape, generator=g)
    d.meta_info.update(PLAIN)
    return d


def recorded_batch(path: str, tokenizer, pad_id: int):
    """The trajectories of a rollout JSONL (failed ones skipped) as a training batch: prompt and
    segments re-tokenised from their text; ``response_mask`` 1 on the model's turns only."""
    from verl.utils.batch import packed_proto

    prompts, responses, masks = [], [], []
    with open(path) as f:
        for record in map(json.loads, f):
            if record["failed"]:
                continue
            prompts.append(tokenizer(record["prompt_text"], add_special_tokens=False).input_ids)
            ids, mask = [], []
            for seg in record["segments"]:
                seg_ids = tokenizer(seg["text"], add_special_tokens=False).input_ids
                ids += seg_ids
                mask += [seg["mask"]] * len(seg_ids)
            responses.append(ids)
            masks.append(mask)
    d = packed_proto(prompts, responses, response_masks=masks, pad_id=pad_id)
    g = torch.Generator().manual_seed(0)
    d.batch["advantages"] = torch.randn(d.batch["responses"].shape, generator=g) * d.batch["response_mask"]
    d.meta_info.update(PLAIN)
    return d


def bare_loop(model_path, data, steps, micro_rows, dtype):
    """Forward + token-mean PPO loss + backward + AdamW, nothing else."""
    from transformers import AutoModelForCausalLM

    from verl.core_algos import compute_policy_loss
    from verl.utils.torch_functional import logprobs_from_logits

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    b = data.batch
    T = b["responses"].shape[1]
    total = float(b["response_mask"].sum())
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad()
        for s in range(0, len(data), micro_rows):
            sl = slice(s, s + micro_rows)
            with torch.autocast("cpu", dtype=getattr(torch, dtype), enabled=dtype != "float32"):
                logits = model(
                    input_ids=b["input_ids"][sl],
                    attention_mask=b["attention_mask"][sl],
                    position_ids=b["position_ids"][sl],
                    use_cache=False,
                ).logits
            lp = logprobs_from_logits(logits[:, -T - 1 : -1].float(), b["responses"][sl])
            mask = b["response_mask"][sl].float()
            loss, *_ = compute_policy_loss(b["old_log_probs"][sl], lp, b["advantages"][sl], mask, cliprange=0.2)
            (loss * mask.sum() / total).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
    return times


def update_rate(worker, data, steps: int) -> tuple[float, list[float]]:
    """Real tokens/s of ``update_actor`` on ``data`` (weight sync excluded; best of ``steps`` after a
    warm-up) and the weight-sync seconds of each update."""
    data.union(worker.compute_log_prob(data).select(batch_keys=["old_log_probs"]))
    worker.update_actor(data)  # warm-up (includes one weight sync)
    upd, sync = [], []
    for _ in range(steps):
        start = time.perf_counter()
        m = worker.update_actor(data).meta_info["metrics"]
        sync.append(m.get("timing_s/weight_sync", 0.0))  # none without a rollout engine
        upd.append(time.perf_counter() - start - sync[-1])
    return real_tokens(data) / min(upd), sync


def own_peak_rss_gb() -> float:
    """This process's peak RSS since it started (``VmHWM``;
    ``ru_maxrss`` would carry the parent's peak across fork and exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024**2


def own_peak_gb(device: str) -> float:
    """`own_peak_rss_gb` on the CPU; on a GPU, the peak memory torch allocated there."""
    return torch.cuda.max_memory_allocated() / 1024**3 if device.startswith("cuda") else own_peak_rss_gb()


def worker_update_rate(cfg: dict, role: str, rows: int, length: int, steps: int, threads: int):
    """``update_actor`` tokens/s of a new ``role`` worker (world size 1, ``threads`` torch threads) on the equal-rows
    batch, that batch, and the trained parameter count; the worker is shut down before it returns."""
    os.environ.setdefault("WORLD_SIZE", "1")
    torch.set_num_threads(threads)
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    worker = ActorRolloutRefWorker(cfg, role=role)
    worker.init_model()
    data = training_batch(rows, length, worker.actor.module.config.vocab_size)
    tps, _ = update_rate(worker, data, steps)
    trained = sum(p.numel() for p in worker.actor.module.parameters() if p.requires_grad)
    worker.shutdown()
    return tps, data, trained


def actor_ref_update(cfg: dict, rows: int, length: int, steps: int, threads: int) -> tuple[float, float, int]:
    """In a fresh process: ``update_actor`` tokens/s of an actor + reference worker on the equal-rows batch, the
    process's peak RSS (GiB) and the trained parameter count."""
    tps, _, trained = worker_update_rate(cfg, "actor_ref", rows, length, steps, threads)
    return tps, own_peak_rss_gb(), trained


def in_fresh_process(fn, *args):
    """``fn(*args)`` in a spawned process of its own, so its peak RSS and thread pools are its own."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def full_vs_lora(cfg: dict, args: argparse.Namespace) -> dict[str, tuple[float, float, int]]:
    """`actor_ref_update` with full fine-tuning, then with LoRA, each `in_fresh_process`."""
    lora = {**cfg, "model": {**cfg["model"], "lora_rank": args.lora_rank, "lora_alpha": args.lora_alpha}}
    return {
        name: in_fresh_process(actor_ref_update, c, args.train_rows, args.train_len, args.steps, args.threads)
        for name, c in (("full", cfg), ("lora", lora))
    }


def print_full_vs_lora(rows: dict[str, tuple[float, float, int]], args: argparse.Namespace) -> None:
    from verl.workers.config import ModelConfig

    (full_tps, full_rss, full_n), (lora_tps, lora_rss, lora_n) = rows["full"], rows["lora"]
    print(f"\n{'full fine-tuning vs LoRA (actor + reference)':<46}{'full':>12}{'LoRA':>12}{'LoRA/full':>12}")
    print(
        f"  LoRA rank {args.lora_rank}, alpha {args.lora_alpha} on {','.join(ModelConfig().target_modules)}; "
        f"{args.train_rows} rows x {args.train_len} tokens"
    )
    print(f"{'  update_actor tokens/s':<46}{full_tps:>12.1f}{lora_tps:>12.1f}{lora_tps / full_tps:>12.2f}")
    print(f"{'  peak RSS of the process GiB':<46}{full_rss:>12.2f}{lora_rss:>12.2f}{lora_rss / full_rss:>12.2f}")
    print(f"{'  trained parameters (M)':<46}{full_n / 1e6:>12.2f}{lora_n / 1e6:>12.2f}{lora_n / full_n:>12.4f}")


LEVERS = (
    (0, True),
    (0, False),
    (8, True),
    (8, False),
)  # (lora_rank, gradient checkpointing); the first is today's setting


def learning_step_worker(cfg: dict, records: str, threads: int):
    """An actor + reference worker (world size 1, ``threads`` torch threads) set for a learning run's training half
    on the recorded batch (one optimiser step over all its rows, a KL loss), and that batch."""
    os.environ.setdefault("WORLD_SIZE", "1")
    torch.set_num_threads(threads)
    from transformers import AutoTokenizer

    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    data = recorded_batch(records, AutoTokenizer.from_pretrained(cfg["model"]["path"]), pad_id=0)
    cfg = {
        **cfg,
        "actor": {**cfg["actor"], "ppo_mini_batch_size": len(data), "use_kl_loss": True, "kl_loss_coef": 0.02},
    }
    worker = ActorRolloutRefWorker(cfg, role="actor_ref")
    worker.init_model()
    return worker, data


def lever_step(cfg: dict, records: str, steps: int, threads: int) -> tuple[float, float, float, int]:
    """In a fresh process: the best of ``steps`` (after a warm-up) learning-run training halves on the recorded
    batch: reference pass seconds, update seconds (KL loss, one optimiser step, the update's own old log-probs),
    then the process's peak RSS (GiB) and the batch's real tokens."""
    worker, data = learning_step_worker(cfg, records, threads)
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        ref = worker.compute_ref_log_prob(data).batch["ref_log_prob"]
        ref_s = time.perf_counter() - start
        batch = data[list(range(len(data)))]  # a copy: the recorded batch stays without ref_log_prob
        batch.batch["ref_log_prob"] = ref
        worker.update_actor(batch)
        times.append((ref_s, time.perf_counter() - start - ref_s))
    worker.shutdown()
    best = min(times[1:], key=sum)
    return best[0], best[1], own_peak_rss_gb(), int(real_tokens(data))


def tree_step(cfg: dict, records: str, steps: int, threads: int) -> dict:
    """In a fresh process: `lever_step`'s training half with ``cfg`` as given (the trainer's defaults but for the
    keys set); returns the best step's seconds, peak RSS, the tokens each pass ran and what the flat path would
    have, and the first step's reference log-probs, loss and gradient norm (for the exactness columns)."""
    from verl.utils import prefix_tree

    cfg, default = dict(cfg), prefix_tree.LONG_SEGMENT
    prefix_tree.LONG_SEGMENT = cfg.pop("long_segment", default)  # the bench's "masked" row sets it out of reach
    try:
        worker, data = learning_step_worker(cfg, records, threads)
        times, first = [], None
        for _ in range(steps + 1):
            worker.ref.take_token_counts("ref")
            start = time.perf_counter()
            ref = worker.compute_ref_log_prob(data).batch["ref_log_prob"]
            ref_s = time.perf_counter() - start
            ref_tokens = worker.ref.take_token_counts("ref")
            batch = data[list(range(len(data)))]
            batch.batch["ref_log_prob"] = ref
            metrics = worker.update_actor(batch).meta_info["metrics"]
            times.append((ref_s, time.perf_counter() - start - ref_s))
            if first is None:
                first = {
                    "ref_log_prob": ref,
                    "pg_loss": metrics["actor/pg_loss"],
                    "grad_norm": metrics["actor/grad_norm"],
                    "tokens": {
                        "ref_flat": ref_tokens["perf/ref_tokens_flat"],
                        "ref_run": ref_tokens["perf/ref_tokens_run"],
                        "update_flat": metrics["perf/update_actor_tokens_flat"],
                        "update_run": metrics["perf/update_actor_tokens_run"],
                    },
                }
        peak = own_peak_gb(cfg.get("device", "cpu"))
        worker.shutdown()
    finally:
        prefix_tree.LONG_SEGMENT = default
    ref_s, upd_s = min(times[1:], key=sum)
    return {**first, "ref_s": ref_s, "update_s": upd_s, "rss": peak, "real": int(real_tokens(data)), "rows": len(data)}


def tree_vs_flat(cfg: dict, args: argparse.Namespace) -> None:
    """`tree_step` with tree packing off, on with every prefixed segment masked, and on (and at
    ``--update_budget``), each `in_fresh_process`; prints the table."""
    base = {
        "model": {"path": cfg["model"]["path"]},
        "actor": {"mixed_precision": cfg["actor"]["mixed_precision"], "optim": {"lr": 1e-6}},
        "rollout": cfg["rollout"],
        "num_threads": args.threads,
        "device": args.device,
    }
    budgets = [None] + ([args.update_budget] if args.update_budget else [])
    rows = {}
    for budget in budgets:
        for tree in ("off", "masked", "on"):  # masked: every segment after a prefix runs with a boolean mask
            packing = "off" if tree == "off" else "on"
            actor = {
                **base["actor"],
                "tree_packing": packing,
                **({"ppo_max_token_len_per_gpu": budget} if budget else {}),
            }
            extra = {"long_segment": 1 << 30} if tree == "masked" else {}
            rows[budget, tree] = in_fresh_process(
                tree_step, {**base, "actor": actor, **extra}, args.records, args.steps, args.threads
            )
    flat = rows[None, "off"]
    print(
        f"\ntree packing on {args.records}: {flat['rows']} trajectories, {flat['real']:,} real tokens; the training "
        "half of a learning-run step (reference pass, then one update with a KL loss), the trainer's defaults; "
        f"best of {args.steps} after a warm-up"
    )
    print(
        f"{'update budget':<15}{'packing':>8}{'ref tokens':>12}{'update tokens':>15}"
        f"{'reference s':>13}{'update s':>10}{'sum s':>8}{'vs flat':>9}"
        f"{'peak GPU GiB' if args.device == 'cuda' else 'peak RSS GiB':>14}"
        f"{'max |d ref lp|':>16}{'d loss':>10}{'d grad norm':>13}"
    )
    for (budget, tree), r in rows.items():
        ref = rows[budget, "off"]
        t = r["tokens"]
        d_lp = float((r["ref_log_prob"] - ref["ref_log_prob"]).abs().max())
        total = r["ref_s"] + r["update_s"]
        print(
            f"{budget or 'default':<15}{tree:>8}{int(t['ref_run']):>12,}{int(t['update_run']):>15,}"
            f"{r['ref_s']:>13.1f}{r['update_s']:>10.1f}"
            f"{total:>8.1f}{(ref['ref_s'] + ref['update_s']) / total:>8.2f}x{r['rss']:>14.2f}{d_lp:>16.2e}"
            f"{abs(r['pg_loss'] - ref['pg_loss']):>10.1e}{abs(r['grad_norm'] - ref['grad_norm']):>13.1e}"
        )


def step_levers(cfg: dict, args: argparse.Namespace) -> None:
    """`lever_step` for each of `LEVERS`, each `in_fresh_process`; prints the table."""
    rows = {}
    for rank, checkpointing in LEVERS:
        c = {
            **cfg,
            "model": {
                **cfg["model"],
                "lora_rank": rank,
                "lora_alpha": 2.0 * rank if rank else 16.0,
                "enable_gradient_checkpointing": checkpointing,
            },
        }
        rows[rank, checkpointing] = in_fresh_process(lever_step, c, args.records, args.steps, args.threads)
    tokens = rows[LEVERS[0]][3]
    print(
        f"\nthe training half of a learning-run step on {args.records} ({tokens:,} tokens; reference pass for a KL "
        f"loss, then one update; best of {args.steps} after a warm-up)"
    )
    print(
        f"{'actor':<8}{'checkpointing':>15}{'reference s':>13}{'update s':>10}{'sum s':>8}"
        f"{'tokens/s':>10}{'vs today':>10}{'peak RSS GiB':>14}"
    )
    base = sum(rows[LEVERS[0]][:2])
    for (rank, checkpointing), (ref_s, upd_s, rss, _) in rows.items():
        name = f"LoRA {rank}" if rank else "full"
        print(
            f"{name:<8}{'on' if checkpointing else 'off':>15}{ref_s:>13.1f}{upd_s:>10.1f}{ref_s + upd_s:>8.1f}"
            f"{tokens / (ref_s + upd_s):>10.1f}{base / (ref_s + upd_s):>9.2f}x{rss:>14.2f}"
        )


def overhead_row(cfg: dict, rows: int, length: int, micro_rows: int, steps: int, threads: int) -> tuple[float, float]:
    """In a fresh process: ``update_actor`` tokens/s of an actor worker (no engine) and the bare loop's, on the same
    equal-rows batch, in ``cfg``'s precision (``actor.mixed_precision``)."""
    from verl.utils.memory import release_free_heap

    update_tps, data, _ = worker_update_rate(cfg, "actor", rows, length, steps, threads)
    gc.collect()
    release_free_heap()
    return update_tps, bare_rate(cfg["model"]["path"], data, steps, micro_rows, cfg["actor"]["mixed_precision"])


def update_overhead(cfg: dict, args: argparse.Namespace, dtype: str) -> None:
    """`overhead_row` for ``dtype`` (and the other precision unless ``--no_precision_compare``); prints the table."""
    dtypes = [dtype] if args.no_precision_compare else [dtype, "float32" if dtype == "bfloat16" else "bfloat16"]
    rows = {
        d: in_fresh_process(
            overhead_row,
            {**cfg, "actor": {**cfg["actor"], "mixed_precision": d}},
            args.train_rows,
            args.train_len,
            args.micro_rows,
            args.steps,
            args.threads,
        )
        for d in dtypes
    }
    print(
        f"\nupdate_actor vs the bare loop on {args.train_rows} rows x {args.train_len} tokens (best of "
        f"{args.steps} after a warm-up)"
    )
    print(f"{'precision':<12}{'update_actor tokens/s':>23}{'bare tokens/s':>15}{'ratio':>8}")
    for d, (update_tps, bare_tps) in rows.items():
        print(f"{d:<12}{update_tps:>23.1f}{bare_tps:>15.1f}{update_tps / bare_tps:>8.2f}")


def real_tokens(data) -> float:
    return float(data.batch["attention_mask"].sum())


def bare_rate(model: str, data, steps: int, micro_rows: int, dtype: str) -> float:
    """Real tokens/s of the bare loop on ``data``: best of ``steps`` after a warm-up."""
    return real_tokens(data) / min(bare_loop(model, data, steps + 1, micro_rows, dtype)[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="HF folder (default: the prepared SmolLM2-135M-Instruct)")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--prompt_len", type=int, default=64)
    parser.add_argument("--new_tokens", type=int, default=64)
    parser.add_argument("--train_rows", type=int, default=8)
    parser.add_argument("--train_len", type=int, default=256)
    parser.add_argument("--micro_rows", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "bfloat16", "float32"],
        help="auto (the trainer's default): bf16 where the CPU runs it fast, else fp32",
    )
    parser.add_argument("--no_precision_compare", action="store_true", help="skip the fp32-vs-bf16 rows")
    parser.add_argument(
        "--records",
        default="data/bench/webshop_grpo_step1.jsonl",
        help="a rollout JSONL (<output_dir>/trajectories/rollouts/step_*.jsonl) for the multi-turn case; '' skips it",
    )
    parser.add_argument("--lora_rank", type=int, default=8, help="the LoRA row's rank")
    parser.add_argument("--lora_alpha", type=float, default=16.0, help="the LoRA row's alpha (scale alpha / rank)")
    parser.add_argument("--lora_only", action="store_true", help="run only the full-vs-LoRA training row")
    parser.add_argument(
        "--overhead_only",
        action="store_true",
        help="run only update_actor vs the bare loop on the equal-rows batch, per precision",
    )
    parser.add_argument(
        "--tree", action="store_true", help="run only tree packing against the flat path on the recorded batch"
    )
    parser.add_argument(
        "--update_budget",
        type=int,
        default=None,
        help="with --tree: also rows at this ppo_max_token_len_per_gpu (the default: the YAML's)",
    )
    parser.add_argument(
        "--levers",
        action="store_true",
        help="run only the step levers (full/LoRA x checkpointing on/off) on the recorded batch",
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="with --tree: where the workers run")
    args = parser.parse_args()
    if args.device == "cuda" and not args.tree:
        parser.error("--device cuda runs only with --tree")

    os.environ.setdefault("WORLD_SIZE", "1")
    torch.set_num_threads(args.threads)
    from model_prep import prepare_default_model

    from verl.utils.memory import current_rss_gb, release_free_heap
    from verl.utils.precision import describe_cpu, resolve_dtype
    from verl.workers.fsdp_workers import ActorRolloutRefWorker
    from verl.workers.rollout.hf_rollout import HFRollout

    chosen = resolve_dtype(args.dtype, args.device)
    dtype = chosen.dtype
    model = args.model or str(prepare_default_model())
    rollout_cfg = {"name": "vllm", "dtype": dtype, "kv_cache_gb": 2, "max_model_len": 2048}
    cfg = {
        "model": {"path": model, "enable_gradient_checkpointing": False},  # the bare loop recomputes nothing either
        "actor": {
            "ppo_mini_batch_size": args.train_rows,
            "ppo_micro_batch_size_per_gpu": args.micro_rows,
            "mixed_precision": dtype,
            "shuffle": False,
            "optim": {"lr": 1e-6},
        },
        "rollout": rollout_cfg,
        "num_threads": args.threads,
    }

    def header() -> None:
        print(f"\n{torch.cuda.get_device_name() if args.device == 'cuda' else describe_cpu()}")
        print(f"model {model}, dtype {dtype} ({'--dtype auto: ' if args.dtype == 'auto' else ''}{chosen.reason})")

    if args.levers:
        header()
        step_levers(cfg, args)
        return
    if args.tree:
        header()
        tree_vs_flat(cfg, args)
        return
    if args.overhead_only:
        header()
        update_overhead(cfg, args, dtype)
        return
    if args.lora_only:
        rows = full_vs_lora(cfg, args)
        header()
        print_full_vs_lora(rows, args)
        return
    worker = ActorRolloutRefWorker(cfg, role="actor_rollout")
    worker.init_model()
    vocab = worker.actor.module.config.vocab_size
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(100, vocab - 100, (args.prompts, args.prompt_len), generator=g).tolist()

    hf = HFRollout(model, dtype=dtype)
    vllm_tps, hf_tps = rollout_bench(worker, hf, prompts, args.new_tokens)
    del hf

    data = training_batch(args.train_rows, args.train_len, vocab)
    upd_tps, sync = update_rate(worker, data, args.steps)
    rec = None
    if args.records:
        rec = recorded_batch(args.records, worker.rollout.llm.get_tokenizer(), pad_id=0)
        rec = rec[list(range(len(rec) // args.train_rows * args.train_rows))]  # whole mini-batches
        rec_upd, _ = update_rate(worker, rec, args.steps)
    rss_now, rss_peak = current_rss_gb(), worker.memory_stats()["peak_rss_gb"]
    worker.shutdown()
    del worker
    gc.collect()
    release_free_heap()  # the bare loops run in the memory the worker held
    bare_tps = bare_rate(model, data, args.steps, args.micro_rows, dtype)
    if rec is not None:
        real = rec.batch["attention_mask"].sum(dim=1)
        learned = float(rec.batch["response_mask"].sum() / real.sum())
        # full-vocabulary logits of 4 rows x ~1,700 positions do not fit beside the model: 2 rows per micro-batch
        rec_bare = bare_rate(model, rec, args.steps, min(args.micro_rows, 2), dtype)

    by_dtype = {dtype: (vllm_tps, bare_tps)}
    if not args.no_precision_compare:
        other = "float32" if dtype == "bfloat16" else "bfloat16"
        other_rollout = vllm_rate_in(
            other, model, {**rollout_cfg, "dtype": other}, prompts, args.new_tokens, args.threads
        )
        other_bare = bare_rate(model, data, args.steps, args.micro_rows, other)
        by_dtype[other] = (other_rollout, other_bare)
    lora_rows = full_vs_lora(cfg, args)

    header()
    print(f"{'measure':<46}{'value':>12}")
    print(f"{'rollout vLLM tokens/s':<46}{vllm_tps:>12.1f}")
    print(f"{'rollout HF generate tokens/s':<46}{hf_tps:>12.1f}")
    print(f"{'  ratio vLLM / HF':<46}{vllm_tps / hf_tps:>12.2f}")
    print(f"{'update_actor training tokens/s':<46}{upd_tps:>12.1f}")
    print(f"{'bare PyTorch fwd+bwd+AdamW tokens/s':<46}{bare_tps:>12.1f}")
    print(f"{'  ratio update_actor / bare (1.0 = no overhead)':<46}{upd_tps / bare_tps:>12.2f}")
    if rec is not None:
        print(
            f"recorded batch {args.records}: {len(rec)} trajectories, {int(real.min())}-{int(real.max())} tokens, "
            f"{learned:.0%} of tokens learned"
        )
        print(f"{'  update_actor tokens/s':<46}{rec_upd:>12.1f}")
        print(f"{'  bare loop tokens/s (2 rows padded, full LM head)':<46}{rec_bare:>12.1f}")
        print(f"{'  ratio update_actor / bare':<46}{rec_upd / rec_bare:>12.2f}")
    print(f"{'worker RSS after the updates: current / peak GiB':<46}{rss_now:>6.2f} /{rss_peak:>5.2f}")
    print(f"{'weight sync into vLLM, seconds (best)':<46}{min(sync):>12.3f}")
    if len(by_dtype) == 2:
        fp32, bf16 = by_dtype["float32"], by_dtype["bfloat16"]
        print(f"\n{'precision on this machine':<46}{'float32':>12}{'bfloat16':>12}{'bf16/fp32':>12}")
        print(f"{'  rollout vLLM tokens/s':<46}{fp32[0]:>12.1f}{bf16[0]:>12.1f}{bf16[0] / fp32[0]:>12.2f}")
        print(f"{'  bare fwd+bwd+AdamW tokens/s':<46}{fp32[1]:>12.1f}{bf16[1]:>12.1f}{bf16[1] / fp32[1]:>12.2f}")
        print(f"{'  chosen by ' + args.dtype:<46}{dtype:>12}")
    print_full_vs_lora(lora_rows, args)


if __name__ == "__main__":
    main()
