#!/bin/bash
# recomputation (activation checkpointing) of the actor and the critic on (default) vs off; the default webshop job,
# fp32 warm start cached, box A deciding as box B; $@ = arms (on|off)
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/recomp"
for arm in "$@"; do
  rm -rf outputs/webshop_ppo; start=$(date +%s)
  [ $arm = off ] && flag=false || flag=true
  OPENMANUS_CACHE="$T/fp32cache/om" ./train_ppo.sh --env_name webshop actor_rollout_ref.model.enable_gradient_checkpointing=$flag critic.model.enable_gradient_checkpointing=$flag > "$T/recomp/term_$arm.$start.txt" 2>&1
  echo "$arm rc $? wall $(( $(date +%s) - start )) s" >> "$T/recomp/summary.txt"
  cp outputs/webshop_ppo/metrics.jsonl "$T/recomp/metrics_$arm.$start.jsonl"
done
