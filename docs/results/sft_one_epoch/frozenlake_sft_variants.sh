#!/bin/bash
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/exp"
for v in "fl_e1_lr2e-4 train.epochs=1 optim.lr=2e-4" "fl_e2_lr1e-4"; do
  set -- $v; name=$1; shift
  rm -rf "$T/exp/sft_$name"
  s=$(date +%s)
  .venv/bin/python -m verl.trainer.main_sft model.path=~/.cache/openmanus_rl/models/SmolLM2-135M-Instruct data.train_files=~/.cache/openmanus_rl/warm_start/frozenlake_react_32_17de0b57c584fa6a/demos_train.parquet data.val_files=~/.cache/openmanus_rl/warm_start/frozenlake_react_32_17de0b57c584fa6a/demos_dev.parquet data.max_length=3072 trainer.output_dir="$T/exp/sft_$name" trainer.experiment_name=sft_$name train.mixed_precision=float32 "$@" > "$T/exp/sft_$name.log" 2>&1
  echo "$name rc $? wall $(( $(date +%s) - s )) s" >> "$T/exp/fl_variants.out"
done
