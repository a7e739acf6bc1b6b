#!/bin/bash
# the default job, fp32 warm start cached, after filling the page cache with ~9 GB of files (a fresh clone's venv and uv cache)
cd "$(git rev-parse --show-toplevel)"  # the repository root
T=${TMPDIR:-/tmp}; mkdir -p "$T/pc"
find "$T/firstrun/.venv" "$T/fr_cache" -type f -print0 | xargs -0 cat > /dev/null 2>&1
free -m > "$T/pc/free_before.txt"
rm -rf outputs/webshop_ppo; start=$(date +%s)
OPENMANUS_CACHE="$T/fp32cache/om" ./train_ppo.sh --env_name webshop > "$T/pc/term_$1.txt" 2>&1
echo "$1 rc $? wall $(( $(date +%s) - start )) s" >> "$T/pc/summary.txt"
cp outputs/webshop_ppo/metrics.jsonl "$T/pc/metrics_$1.jsonl"
