#!/bin/bash
# The default first run from a fresh clone with every cache empty, on box A made to decide as box B does:
# the new OPENMANUS_CACHE starts with a matmul-probe reading of box B's kind (bf16 4.5x slower than fp32),
# so dtype auto picks fp32 everywhere. $1 = run number.
set -u
ROOT=$(git rev-parse --show-toplevel)  # the checkout to clone
T=${TMPDIR:-/tmp}
rm -rf "$T/firstrun" "$T/fr_cache"
git clone -q "$ROOT" "$T/firstrun"
mkdir -p "$T/fr_cache/om" "$T/sftab"
KEY=$(cat "$HOME/.cache/openmanus_rl/precision_probe.json" | python3 -c "import json,sys; print(json.load(sys.stdin)['key'])")
echo "{\"key\": \"$KEY\", \"gflops\": {\"float32\": 218.0, \"bfloat16\": 49.0}}" > "$T/fr_cache/om/precision_probe.json"
cd "$T/firstrun"
start=$(date +%s)
OPENMANUS_CACHE="$T/fr_cache/om" UV_CACHE_DIR="$T/fr_cache/uv" PIP_CACHE_DIR="$T/fr_cache/pip" ./train_ppo.sh --env_name webshop > "$T/sftab/first_run_fp32_$1.txt" 2>&1
echo "rc $? wall $(( $(date +%s) - start )) s" >> "$T/sftab/first_run_fp32_$1.txt"
mkdir -p "$T/sftab/fr$1" && cp outputs/webshop_ppo/metrics.jsonl "$T/sftab/fr$1/" 2>/dev/null
grep -h "precision\]" outputs/webshop_ppo/run.log | sort | uniq -c > "$T/sftab/fr$1/precision_lines.txt" 2>/dev/null
