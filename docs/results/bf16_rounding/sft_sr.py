"""Experiment: SFT under bf16 autocast with every Linear's fp32 weight rounded stochastically (fresh noise per
forward, straight-through gradient) instead of autocast's round-to-nearest."""
import sys
import torch
import torch.nn.functional as F
from verl.utils.precision import to_bf16_stochastic

gen = torch.Generator().manual_seed(0)

class SRCast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w):
        return to_bf16_stochastic(w, gen)
    @staticmethod
    def backward(ctx, g):
        return g.float()

def forward(self, x):
    if torch.is_autocast_enabled("cpu") and self.weight.dtype == torch.float32:
        return F.linear(x, SRCast.apply(self.weight), self.bias)
    return F.linear(x, self.weight, self.bias)

torch.nn.Linear.forward = forward
from verl.trainer.main_sft import main
sys.exit(main(sys.argv[1:]))
