#!/usr/bin/env bash
# GRPO (4 samples per task, KL loss against the reference; verl/trainer/config/preset/grpo.yaml):
#   ./train_grpo.sh --env_name webshop [options] [overrides]
exec "$(dirname "${BASH_SOURCE[0]}")/scripts/run_training.sh" grpo "$@"
