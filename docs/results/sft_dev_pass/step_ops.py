"""The operators of one packed fp32 SFT step (4 demonstrations of the default warm start), by torch's profiler.
.venv/bin/python docs/results/sft_dev_pass/step_ops.py <base model folder> <warm start>/demos_train.parquet"""

import sys, time, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.trainer.sft_trainer import read_samples, pack_samples, token_nll
from verl.utils.prefix_tree import use_tree_attention

model_dir, demos = sys.argv[1], sys.argv[2]
torch.set_num_threads(2)
tok = AutoTokenizer.from_pretrained(model_dir)
ids, masks, _ = read_samples(demos, 3072)
print("lengths", [len(i) for i in ids[:8]], "learned", [sum(m) for m in masks[:8]])
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
use_tree_attention(model)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)


def step():
    mb = pack_samples([ids[i] for i in range(4)], [masks[i] for i in range(4)], tok.eos_token_id)
    mb.meta_info["tree_packed"] = True
    nll, n = token_nll(model, mb, "cpu", "float32")
    (nll.sum() / n.sum()).backward()
    t = time.perf_counter()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t


step()
from torch.profiler import profile, ProfilerActivity

with profile(activities=[ProfilerActivity.CPU]) as p:
    t0 = time.perf_counter()
    o = step()
    print("step", time.perf_counter() - t0, "opt", o)
print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
