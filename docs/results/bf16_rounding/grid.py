import os
import torch
from safetensors.torch import load_file
M = os.path.expanduser("~/.cache/openmanus_rl/models/SmolLM2-135M-Instruct/model.safetensors")
W = os.path.expanduser("~/.cache/openmanus_rl/warm_start/webshop_react_32_3fad395c401df765/sft/huggingface/model.safetensors")
base, ft = load_file(M), load_file(W)
n = on = lost = total = srl = 0
for k, b in base.items():
    b = b.float(); f = ft[k].float(); d = f - b
    on += (b.to(torch.bfloat16).float() == b).sum().item(); n += b.numel()
    r = f.to(torch.bfloat16).float() - b          # delta seen by a bf16 (RNE) view
    total += d.norm().item() ** 2; lost += (r - d).norm().item() ** 2
    kept = (r == 0) & (d != 0); srl += kept.sum().item()
print(f"base weights on the bf16 grid: {on/n:.4f} ({n} params); dtype {next(iter(base.values())).dtype}")
print(f"fine-tuned delta: changed params whose bf16 view equals the base: {srl/n:.3f}")
print(f"|RNE(bf16 view) delta - true delta| / |true delta| = {(lost/total)**0.5:.3f}")
