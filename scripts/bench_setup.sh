#!/usr/bin/env bash
# Set-up on a cold package cache, uv against pip, side by side in one run.
#
#   scripts/bench_setup.sh          # one round: uv, then pip
#   scripts/bench_setup.sh 2        # two rounds (uv, pip, uv, pip)
#
# Each try clones this repository's HEAD into a fresh folder and runs `scripts/setup.sh` there
# (a new .venv, the default extras) with an empty pip cache and an empty uv cache, and no uv on
# PATH (so the uv try installs uv itself, as a fresh machine does). It prints each try's seconds
# and the pip / uv ratio of each round; the logs stay in the printed folder.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-1}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/bench_setup.sh [ROUNDS]" >&2; exit 2; }
WORK="$(mktemp -d /tmp/bench_setup.XXXXXX)"
echo "logs in $WORK"

path_without_uv() {  # PATH less any folder holding uv or a virtualenv's bin
    local out=() d dirs
    IFS=: read -ra dirs <<<"$PATH"
    for d in "${dirs[@]}"; do [[ -x "$d/uv" || -x "$d/activate" ]] || out+=("$d"); done
    (IFS=:; echo "${out[*]}")
}

try() {  # try INSTALLER NAME: seconds of a cold set-up in a fresh clone
    local dir="$WORK/$2"
    git clone -q "$ROOT" "$dir/repo"
    mkdir -p "$dir/pip-cache" "$dir/uv-cache"
    local start end
    start=$(date +%s.%N)
    (cd "$dir/repo" && env -u VIRTUAL_ENV PATH="$(path_without_uv)" \
        PIP_CACHE_DIR="$dir/pip-cache" UV_CACHE_DIR="$dir/uv-cache" OPENMANUS_INSTALLER="$1" \
        bash scripts/setup.sh >"$dir/setup.log" 2>&1) || { echo "$2 failed: see $dir/setup.log" >&2; exit 1; }
    end=$(date +%s.%N)
    rm -rf "$dir/repo/.venv" "$dir/pip-cache" "$dir/uv-cache"
    python3 -c "print($end - $start)"
}

printf '%-8s%12s%12s%12s\n' round "uv s" "pip s" "pip / uv"
for round in $(seq "$ROUNDS"); do
    uv_s=$(try uv "uv$round")
    pip_s=$(try pip "pip$round")
    printf '%-8s%12.1f%12.1f%11.2fx\n' "$round" "$uv_s" "$pip_s" "$(python3 -c "print($pip_s / $uv_s)")"
done
