import copy, os, sys, time, torch
from transformers import AutoModelForCausalLM
from verl.trainer.sft_trainer import read_samples, pack_samples, token_nll
torch.set_num_threads(2)
W = os.path.expanduser("~/.cache/openmanus_rl/warm_start/webshop_react_32_3fad395c401df765")
M = os.path.expanduser("~/.cache/openmanus_rl/models/SmolLM2-135M-Instruct")
ids, masks, _ = read_samples(W + "/demos_train.parquet", 3072)
b1 = pack_samples(ids[0:2], masks[0:2], 0)
b2 = pack_samples(ids[2:4], masks[2:4], 0)
base = AutoModelForCausalLM.from_pretrained(M, dtype=torch.float32, attn_implementation="sdpa")
def loss(m, b, dt):
    nll, n = token_nll(m, b, "cpu", dt)
    return nll.sum() / n.sum()
with torch.no_grad():
    l20 = {dt: loss(base, b2, dt).item() for dt in ("float32", "bfloat16")}
print("before: batch2 loss", l20, flush=True)
for dt in sys.argv[1:]:
    m = copy.deepcopy(base); m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.0)
    t = time.time(); l = loss(m, b1, dt); l.backward()
    gn = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    with torch.no_grad():
        r = {e: loss(m, b2, e).item() for e in ("float32", "bfloat16")}
        r1 = {e: loss(m, b1, e).item() for e in ("float32", "bfloat16")}
    print(f"train {dt}: loss1 {l.item():.4f} gn {gn:.3f} -> batch2 {r} batch1 {r1} ({time.time()-t:.0f}s)", flush=True)
