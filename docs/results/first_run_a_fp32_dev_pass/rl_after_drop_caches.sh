#!/bin/bash
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/pc"
sync; echo 1 > /proc/sys/vm/drop_caches
free -m > "$T/pc/free_before_drop.txt"
rm -rf outputs/webshop_ppo; start=$(date +%s)
OPENMANUS_CACHE="$T/fp32cache/om" ./train_ppo.sh --env_name webshop > "$T/pc/term_$1.txt" 2>&1
echo "$1 rc $? wall $(( $(date +%s) - start )) s" >> "$T/pc/summary.txt"
cp outputs/webshop_ppo/metrics.jsonl "$T/pc/metrics_$1.jsonl"
