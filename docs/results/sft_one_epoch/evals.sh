#!/bin/bash
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/exp/eval"
for pair in "e1_lr2e-4 $T/exp/sft_e1_lr2e-4/huggingface" "default $HOME/.cache/openmanus_rl/warm_start/webshop_react_32_b7ea61ae99731869/sft/huggingface"; do
  set -- $pair
  s=$(date +%s)
  .venv/bin/python -m openmanus_rl.eval --model $2 --split test --limit 200 --dtype float32 --out "$T/exp/eval/$1.json" > "$T/exp/eval/$1.log" 2>&1
  echo "$1 rc $? wall $(( $(date +%s) - s )) s" >> "$T/exp/eval/done.out"
done
