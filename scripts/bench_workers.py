"""Worker benchmark: rollout engines, training overhead and weight sync, measured side by side in one run.

    python scripts/bench_workers.py                       # SmolLM2-135M-Instruct (prepared once)
    python scripts/bench_workers.py --model DIR --prompts 32 --new_tokens 64 --train_rows 8 --train_len 256

Prints:
  * rollout tokens/s of the vLLM engine and of the HF ``generate`` engine on
    the same prompts and sampling settings, and their ratio;
  * training tokens/s of ``update_actor`` (FSDP2 wrapper, PPO loss, micro-batch
    loop, grad clip, scheduler) against a bare PyTorch loop (forward, the same
    token-mean policy loss, backward, AdamW) on the same model and tokens; the
    ratio is the engine's overhead (1.0 = none);
  * seconds to push the policy's weights into the live vLLM engine.
Everything runs in this process (world size 1), with ``--threads`` torch threads.
"""

from __future__ import annotations

import argparse
import os
import time

import torch


def rollout_bench(worker, hf_engine, prompts, new_tokens):
    from verl.protocol import DataProto
    from verl.workers.rollout.base import SamplingParams

    params = [SamplingParams(temperature=1.0, max_tokens=new_tokens, seed=i) for i in range(len(prompts))]
    data = DataProto.from_dict(non_tensors={"prompt_ids": prompts, "seed": list(range(len(prompts)))}, meta_info={"temperature": 1.0, "max_tokens": new_tokens})
    def best_rate(run) -> float:
        run()  # warm-up: first calls pay one-off kernel and allocator costs
        rates = []
        for _ in range(2):
            start = time.perf_counter()
            tokens = run()
            rates.append(tokens / (time.perf_counter() - start))
        return max(rates)

    vllm_rate = best_rate(lambda: sum(len(r) for r in worker.generate_sequences(data).non_tensor_batch["response_ids"]))
    hf_rate = best_rate(lambda: sum(len(o.token_ids) for o in hf_engine.generate(prompts, params)))
    return vllm_rate, hf_rate


def training_batch(rows, length, vocab, seed=0):
    from verl.utils.batch import packed_proto

    g = torch.Generator().manual_seed(seed)
    prompt_len = length // 4
    prompts = torch.randint(100, vocab - 100, (rows, prompt_len), generator=g).tolist()
    responses = torch.randint(100, vocab - 100, (rows, length - prompt_len), generator=g).tolist()
    d = packed_proto(prompts, responses, pad_id=0)
    d.batch["advantages"] = torch.randn(d.batch["responses"].shape, generator=g)
    d.meta_info["temperature"] = 1.0
    return d


def bare_loop(model_path, data, steps, micro_rows, dtype):
    """Forward + token-mean PPO loss + backward + AdamW, nothing else."""
    from transformers import AutoModelForCausalLM

    from verl.trainer.ppo.core_algos import compute_policy_loss
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
                logits = model(input_ids=b["input_ids"][sl], attention_mask=b["attention_mask"][sl], position_ids=b["position_ids"][sl], use_cache=False).logits
            lp = logprobs_from_logits(logits[:, -T - 1 : -1].float(), b["responses"][sl])
            mask = b["response_mask"][sl].float()
            loss, *_ = compute_policy_loss(b["old_log_probs"][sl], lp, b["advantages"][sl], mask, cliprange=0.2)
            (loss * mask.sum() / total).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
    return times


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
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    args = parser.parse_args()

    os.environ.setdefault("WORLD_SIZE", "1")
    torch.set_num_threads(args.threads)
    from verl.utils.model_prep import prepare_default_model
    from verl.workers.fsdp_workers import ActorRolloutRefWorker
    from verl.workers.rollout.hf_rollout import HFRollout

    model = args.model or str(prepare_default_model())
    cfg = {
        "model": {"path": model},
        "actor": {"ppo_mini_batch_size": args.train_rows, "ppo_micro_batch_size_per_gpu": args.micro_rows, "mixed_precision": args.dtype,
                  "shuffle": False, "optim": {"lr": 1e-6}},
        "rollout": {"name": "vllm", "dtype": args.dtype, "kv_cache_gb": 2, "max_model_len": 2048},
        "num_threads": args.threads,
    }
    worker = ActorRolloutRefWorker(cfg, role="actor_rollout")
    worker.init_model()
    vocab = worker.actor.module.config.vocab_size
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(100, vocab - 100, (args.prompts, args.prompt_len), generator=g).tolist()

    hf = HFRollout(model, dtype=args.dtype)
    vllm_tps, hf_tps = rollout_bench(worker, hf, prompts, args.new_tokens)
    del hf

    data = training_batch(args.train_rows, args.train_len, vocab)
    data.union(worker.compute_log_prob(data).select(batch_keys=["old_log_probs"]))
    tokens = float(data.batch["attention_mask"].sum())
    worker.update_actor(data)  # warm-up (includes one weight sync)
    upd, sync = [], []
    for _ in range(args.steps):
        start = time.perf_counter()
        m = worker.update_actor(data).meta_info["metrics"]
        upd.append(time.perf_counter() - start - m["timing_s/weight_sync"])
        sync.append(m["timing_s/weight_sync"])
    worker.shutdown()
    bare = bare_loop(model, data, args.steps + 1, args.micro_rows, args.dtype)[1:]

    upd_tps, bare_tps = tokens / min(upd), tokens / min(bare)
    print(f"\nmodel {model}, {args.threads} threads, {args.dtype}")
    print(f"{'measure':<46}{'value':>12}")
    print(f"{'rollout vLLM tokens/s':<46}{vllm_tps:>12.1f}")
    print(f"{'rollout HF generate tokens/s':<46}{hf_tps:>12.1f}")
    print(f"{'  ratio vLLM / HF':<46}{vllm_tps / hf_tps:>12.2f}")
    print(f"{'update_actor training tokens/s':<46}{upd_tps:>12.1f}")
    print(f"{'bare PyTorch fwd+bwd+AdamW tokens/s':<46}{bare_tps:>12.1f}")
    print(f"{'  ratio update_actor / bare (1.0 = no overhead)':<46}{upd_tps / bare_tps:>12.2f}")
    print(f"{'weight sync into vLLM, seconds (best)':<46}{min(sync):>12.3f}")


if __name__ == "__main__":
    main()
