"""Seconds of RayPPOTrainer.init_workers for the default job's config (fp32 warm start), the groups' model loading
overlapped (now) or waited for in turn (before).
.venv/bin/python docs/results/init_overlap/bench.py {overlap,serial} <warm start>/sft/huggingface"""

import os, sys, time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
import ray
from transformers import AutoTokenizer
from verl.trainer.ppo.config import load_config
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.single_controller.ray.base import RayWorkerGroup

mode, model = sys.argv[1], sys.argv[2]
if mode == "serial":
    start = RayWorkerGroup.start

    class Done:
        def __init__(self, value):
            self.value = value

        def get(self):
            return self.value

    RayWorkerGroup.start = lambda self, m, *a, **k: Done(start(self, m, *a, **k).get())
cfg = load_config(
    [
        f"actor_rollout_ref.model.path={model}",
        "data.train_files=data/webshop/train.parquet",
        "data.val_files=data/webshop/dev.parquet",
        "actor_rollout_ref.actor.mixed_precision=float32",
        "actor_rollout_ref.rollout.dtype=float32",
        "critic.mixed_precision=float32",
    ]
)
ray.init(address="local", num_cpus=cfg.ray_init.num_cpus, include_dashboard=False)
trainer = RayPPOTrainer(cfg, AutoTokenizer.from_pretrained(model))
t0 = time.perf_counter()
trainer.init_workers()
print(f"{mode} init_workers {time.perf_counter() - t0:.1f} s", flush=True)
trainer.shutdown()
ray.shutdown()
