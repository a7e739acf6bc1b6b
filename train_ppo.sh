#!/usr/bin/env bash
# PPO (GAE with a critic; verl/trainer/config/preset/ppo.yaml): ./train_ppo.sh --env_name webshop [options] [overrides]
exec "$(dirname "${BASH_SOURCE[0]}")/scripts/run_training.sh" ppo "$@"
