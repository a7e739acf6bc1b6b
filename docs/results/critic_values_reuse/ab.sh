#!/bin/bash
# critic.reuse_values_forward off vs on, the default webshop job with the fp32 warm start cached, box A deciding as box B
cd /work/main
for arm in "$@"; do
  rm -rf outputs/webshop_ppo; start=$(date +%s)
  OPENMANUS_CACHE=/tmp/fp32cache/om ./train_ppo.sh --env_name webshop critic.reuse_values_forward=$arm > /tmp/critab/term_$arm.$start.txt 2>&1
  echo "$arm rc $? wall $(( $(date +%s) - start )) s" >> /tmp/critab/summary.txt
  cp outputs/webshop_ppo/metrics.jsonl /tmp/critab/metrics_$arm.$start.jsonl  # kept here as off_N / on_N
done
