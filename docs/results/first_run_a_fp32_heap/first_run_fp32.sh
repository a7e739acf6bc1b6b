#!/bin/bash
# The default first run from a fresh clone with every cache empty, on box A made to decide as box B does:
# the new OPENMANUS_CACHE starts with a matmul-probe reading of box B's kind (bf16 4.5x slower than fp32),
# so dtype auto picks fp32 everywhere. $1 = run number.
set -u
rm -rf /tmp/firstrun /tmp/fr_cache
git clone -q /work/main /tmp/firstrun
mkdir -p /tmp/fr_cache/om
KEY=$(cat /root/.cache/openmanus_rl/precision_probe.json | python3 -c "import json,sys; print(json.load(sys.stdin)['key'])")
echo "{\"key\": \"$KEY\", \"gflops\": {\"float32\": 218.0, \"bfloat16\": 49.0}}" > /tmp/fr_cache/om/precision_probe.json
cd /tmp/firstrun
start=$(date +%s)
OPENMANUS_CACHE=/tmp/fr_cache/om UV_CACHE_DIR=/tmp/fr_cache/uv PIP_CACHE_DIR=/tmp/fr_cache/pip ./train_ppo.sh --env_name webshop > /tmp/fr2/first_run_fp32_$1.txt 2>&1
echo "rc $? wall $(( $(date +%s) - start )) s" >> /tmp/fr2/first_run_fp32_$1.txt
mkdir -p /tmp/fr2/fr$1 && cp outputs/webshop_ppo/metrics.jsonl /tmp/fr2/fr$1/ 2>/dev/null
grep -h "precision\]" outputs/webshop_ppo/run.log | sort | uniq -c > /tmp/fr2/fr$1/precision_lines.txt 2>/dev/null
