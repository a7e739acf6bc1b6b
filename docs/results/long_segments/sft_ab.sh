#!/bin/bash
# A/B: SFT of the default warm start's demonstrations, segments masked (old) vs path (new); $1 = dtype, $2 = rounds
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/sftab"
D=${D:-$HOME/.cache/openmanus_rl/warm_start/webshop_react_32_0aaab3b0625ce5f8}  # the warm start whose demonstrations SFT reads
for r in $(seq 1 $2); do
  for mode in masked path; do
    if [ $mode = masked ]; then LS=1073741824; else LS=768; fi
    out="$T/sftab/$1_${mode}_$r"
    rm -rf $out
    /usr/bin/time -v .venv/bin/python -c "
import sys, runpy
import verl.utils.prefix_tree as p
p.LONG_SEGMENT = $LS
sys.argv = ['main_sft'] + sys.argv[1:]
runpy.run_module('verl.trainer.main_sft', run_name='__main__')
" model.path="$HOME/.cache/openmanus_rl/models/SmolLM2-135M-Instruct" data.train_files=$D/demos_train.parquet data.val_files=$D/demos_dev.parquet train.mixed_precision=$1 trainer.output_dir=$out trainer.logger=[jsonl] > "$T/sftab/$1_${mode}_$r.log" 2>&1
    python3 -c "import json; s=json.load(open('$out/sft_summary.json')); print('$1 $mode round $r', 'seconds %.1f' % s['seconds'], 'dev %.5f' % s['best_dev_loss'])" >> "$T/sftab/results.txt"
    grep "Maximum resident" "$T/sftab/$1_${mode}_$r.log" >> "$T/sftab/results.txt"
  done
done
