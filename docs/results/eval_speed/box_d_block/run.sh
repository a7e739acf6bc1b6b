#!/usr/bin/env bash
cd /work/main
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
M=/root/.cache/openmanus_rl/warm_start/webshop_react_32_c206897aa3cbcc03/sft/huggingface
for arm in 128_1 32_1 32_2 128_2; do
  b=${arm%_*}
  /usr/bin/time -v .venv/bin/python -m openmanus_rl.eval --model $M --env_name webshop --limit 100 --block_size $b --out /work/logs/blk/ws100_b$arm.json > /work/logs/blk/$arm.log 2>&1
  echo "$arm $(date -u +%T)"
done
