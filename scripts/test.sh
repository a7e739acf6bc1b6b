#!/usr/bin/env bash
# Run the test suite: installs the project first if needed (scripts/setup.sh is
# idempotent and quick when nothing changed), with the env extras the tests need
# (sciworld: ScienceWorld and Java; alfworld: its engine), then the linter (scripts/lint.sh), then pytest with any
# arguments.
#
#   scripts/test.sh                 # everything (what CI runs)
#   scripts/test.sh -m "not slow"   # the fast tier: no servers, Ray or inference engines
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OPENMANUS_EXTRAS="sciworld,alfworld${OPENMANUS_EXTRAS:+,$OPENMANUS_EXTRAS}" bash scripts/setup.sh
PYBIN="${VIRTUAL_ENV:-$ROOT/.venv}/bin/python"
bash scripts/lint.sh   # ruff: the linter and the formatter, before any test
export PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
# Two pytest workers (pytest-xdist): most of a test's time is process start-up and waiting (one process kept 0.7
# of one core busy). Each test file runs whole on one worker, and the files that start engines inside the pytest
# process run together on one (tests/conftest.py's groups). OPENMANUS_TEST_WORKERS=0: one process.
WORKERS="${OPENMANUS_TEST_WORKERS:-2}"
[[ "$WORKERS" =~ ^[0-9]+$ ]] || { echo "OPENMANUS_TEST_WORKERS must be a number of workers (got '$WORKERS')" >&2; exit 2; }
# The suite writes model checkpoints under the temp folder (a passing test's are deleted when it ends; a few GB
# at once at most): a full disk fails a checkpoint write mid-test, so say up front when space is short.
TMP_FREE_MB=$(df -Pm "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2 {print $4}') || true  # a warning never stops the run
(( ${TMP_FREE_MB:-4096} >= 4096 )) || echo "[test] warning: only ${TMP_FREE_MB} MB free under ${TMPDIR:-/tmp}; the suite may need about 4 GB" >&2
XDIST=(); [[ "$WORKERS" == 0 ]] || XDIST=(-n "$WORKERS" --dist loadgroup)
exec "$PYBIN" -m pytest ${XDIST[@]+"${XDIST[@]}"} --durations=25 "$@"   # the 25 slowest tests: where the time goes
