import shutil, sys, torch
from pathlib import Path
from safetensors.torch import load_file, save_file
src, dst, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
shutil.copytree(src, dst, dirs_exist_ok=True)
g = torch.Generator().manual_seed(seed)
sd = load_file(src / "model.safetensors")
out = {}
for k, t in sd.items():
    bits = t.float().contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, generator=g, dtype=torch.int32)
    out[k] = ((bits + noise) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)  # exact: low bits are zero
save_file(out, dst / "model.safetensors", metadata={"format": "pt"})
print("saved", dst)
