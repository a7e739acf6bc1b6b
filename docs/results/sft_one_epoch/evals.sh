#!/bin/bash
cd /work/main
for pair in "e1_lr2e-4 /tmp/exp/sft_e1_lr2e-4/huggingface" "default $HOME/.cache/openmanus_rl/warm_start/webshop_react_32_b7ea61ae99731869/sft/huggingface"; do
  set -- $pair
  s=$(date +%s)
  .venv/bin/python -m openmanus_rl.eval --model $2 --split test --limit 200 --dtype float32 --out /tmp/exp/eval/$1.json > /tmp/exp/eval/$1.log 2>&1
  echo "$1 rc $? wall $(( $(date +%s) - s )) s" >> /tmp/exp/eval/done.out
done
