#!/bin/bash
# critic.reuse_values_forward off vs on, the default webshop job with the fp32 warm start cached, box A deciding as box B
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/critab"
for arm in "$@"; do
  rm -rf outputs/webshop_ppo; start=$(date +%s)
  OPENMANUS_CACHE="$T/fp32cache/om" ./train_ppo.sh --env_name webshop critic.reuse_values_forward=$arm > "$T/critab/term_$arm.$start.txt" 2>&1
  echo "$arm rc $? wall $(( $(date +%s) - start )) s" >> "$T/critab/summary.txt"
  cp outputs/webshop_ppo/metrics.jsonl "$T/critab/metrics_$arm.$start.jsonl"  # kept here as off_N / on_N
done
