"""Seconds, minor page faults and system time of packed fp32 SFT steps (4 demonstrations each) of the default warm start."""
import resource, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.trainer.sft_trainer import read_samples, pack_samples, token_nll
from verl.utils.prefix_tree import use_tree_attention

model_dir, demos, steps, trim = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == 'trim'
from verl.utils.memory import release_free_heap
torch.set_num_threads(2)
tok = AutoTokenizer.from_pretrained(model_dir)
ids, masks, _ = read_samples(demos, 3072)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
use_tree_attention(model)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
for step in range(steps):
    rows = [0, 1, 2, 3]
    mb = pack_samples([ids[i] for i in rows], [masks[i] for i in rows], tok.eos_token_id)
    mb.meta_info["tree_packed"] = True
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    nll, n = token_nll(model, mb, "cpu", "float32")
    (nll.sum() / n.sum()).backward()
    opt.step(); opt.zero_grad(set_to_none=True)
    if trim: release_free_heap()
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    print(f"step {step} wall {t1 - t0:.2f} s minflt {r1.ru_minflt - r0.ru_minflt} sys {r1.ru_stime - r0.ru_stime:.2f} s user {r1.ru_utime - r0.ru_utime:.2f} s", flush=True)
