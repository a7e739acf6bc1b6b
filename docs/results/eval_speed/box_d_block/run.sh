#!/usr/bin/env bash
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/blk"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
M=${M:-$HOME/.cache/openmanus_rl/warm_start/webshop_react_32_c206897aa3cbcc03/sft/huggingface}  # the warm start evaluated
for arm in 128_1 32_1 32_2 128_2; do
  b=${arm%_*}
  /usr/bin/time -v .venv/bin/python -m openmanus_rl.eval --model $M --env_name webshop --limit 100 --block_size $b --out "$T/blk/ws100_b$arm.json" > "$T/blk/$arm.log" 2>&1
  echo "$arm $(date -u +%T)"
done
