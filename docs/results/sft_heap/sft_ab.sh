#!/bin/bash
# A/B: SFT of the default warm start's demonstrations in fp32, the freed heap given back after every step
# (release_heap forced on, the old behaviour) vs kept (the new default for SFT); $1 = rounds
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/sfttrim"
D=${D:-$HOME/.cache/openmanus_rl/warm_start/webshop_react_32_a54ab7d3ce8c4d3c}  # the warm start whose demonstrations SFT reads
for r in $(seq 1 $1); do
  for mode in trim keep; do
    out="$T/sfttrim/${mode}_$r"
    rm -rf $out
    /usr/bin/time -v .venv/bin/python -c "
import sys, runpy
import verl.workers.trainable as t
if '$mode' == 'trim':
    init = t.TrainableModule.__init__
    t.TrainableModule.__init__ = lambda self, *a, **k: init(self, *a, **{**k, 'release_heap': True})
sys.argv = ['main_sft'] + sys.argv[1:]
runpy.run_module('verl.trainer.main_sft', run_name='__main__')
" model.path="$HOME/.cache/openmanus_rl/models/SmolLM2-135M-Instruct" data.train_files=$D/demos_train.parquet data.val_files=$D/demos_dev.parquet train.mixed_precision=float32 trainer.output_dir=$out trainer.logger=[jsonl] > "$T/sfttrim/${mode}_$r.log" 2>&1
    python3 -c "import json; s=json.load(open('$out/sft_summary.json')); print('$mode round $r', 'seconds %.1f' % s['seconds'], 'dev %.5f' % s['best_dev_loss'])" >> "$T/sfttrim/results.txt"
    grep -E "Maximum resident|Minor|System time|User time" "$T/sfttrim/${mode}_$r.log" >> "$T/sfttrim/results.txt"
  done
done
