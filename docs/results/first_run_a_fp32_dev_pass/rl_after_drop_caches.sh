#!/bin/bash
cd /work/main
sync; echo 1 > /proc/sys/vm/drop_caches
free -m > /tmp/pc/free_before_drop.txt
rm -rf outputs/webshop_ppo; start=$(date +%s)
OPENMANUS_CACHE=/tmp/fp32cache/om ./train_ppo.sh --env_name webshop > /tmp/pc/term_$1.txt 2>&1
echo "$1 rc $? wall $(( $(date +%s) - start )) s" >> /tmp/pc/summary.txt
cp outputs/webshop_ppo/metrics.jsonl /tmp/pc/metrics_$1.jsonl
