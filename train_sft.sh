#!/usr/bin/env bash
# The warm start alone: expert demonstrations on train tasks, then SFT (cached; see scripts/warm_start.py).
#   ./train_sft.sh --env_name webshop [--n_demos 32] [--model HF_FOLDER] [sft overrides, e.g. train.epochs=2]
# The last line printed is the fine-tuned Hugging Face folder.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
[[ -x .venv/bin/python || -n "${VIRTUAL_ENV:-}" ]] || bash scripts/setup.sh
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
exec "${VIRTUAL_ENV:-$ROOT/.venv}/bin/python" scripts/warm_start.py "$@"
