"""Where a default-warm-start SFT run's time goes: `main_sft` with its dev passes, exports and updates timed.
.venv/bin/python docs/results/sft_dev_pass/sft_profile.py model.path=... data.train_files=<warm start>/demos_train.parquet
    data.val_files=<warm start>/demos_dev.parquet train.mixed_precision=float32 trainer.output_dir=<tmp>/sftprof/out
(run before train.eval_before_train existed: the base model's dev pass is the first dev_loss line of profile.txt)"""

import sys, runpy, time, functools
import verl.trainer.sft_trainer as st
from verl.utils import fsdp_utils
import verl.workers.trainable as tr


def timed(owner, name, label):
    f = getattr(owner, name)

    @functools.wraps(f)
    def g(*a, **k):
        t0 = time.perf_counter()
        r = f(*a, **k)
        print(f"[prof] {label} {time.perf_counter() - t0:.2f} s", flush=True)
        return r

    setattr(owner, name, g)


timed(st.SFTTrainer, "dev_loss", "dev_loss")
timed(fsdp_utils, "export_hf", "export_hf")
timed(fsdp_utils, "full_model_state_dict", "full_state_dict")
timed(tr.TrainableModule, "run_update", "run_update")
timed(st.SFTTrainer, "_build", "build")
t0 = time.perf_counter()
sys.argv = ["main_sft"] + sys.argv[1:]
try:
    runpy.run_module("verl.trainer.main_sft", run_name="__main__")
finally:
    print(f"[prof] total {time.perf_counter() - t0:.2f} s", flush=True)
