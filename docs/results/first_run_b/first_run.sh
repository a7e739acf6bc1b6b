#!/bin/bash
# The default first run from a fresh clone with every cache empty, on a box of kind B (AVX512 without native bf16:
# dtype auto picks fp32). $1 = run number, $2 = the clone's folder. Every cache (uv, pip, OPENMANUS_CACHE) is a new
# empty folder under $TMPDIR/first_run_cache$1 ($TMPDIR defaults to the system's temporary folder).
set -u
T=${TMPDIR:-/tmp}
rm -rf "$2" "$T/first_run_cache$1"
git clone -q "$(git rev-parse --show-toplevel)" "$2"
mkdir -p "$T/first_run_cache$1/om"
cd "$2"
start=$(date +%s)
OPENMANUS_CACHE="$T/first_run_cache$1/om" UV_CACHE_DIR="$T/first_run_cache$1/uv" PIP_CACHE_DIR="$T/first_run_cache$1/pip" \
  ./train_ppo.sh --env_name webshop > "run$1_terminal.txt" 2>&1
echo "rc $? wall $(( $(date +%s) - start )) s" >> "run$1_terminal.txt"
