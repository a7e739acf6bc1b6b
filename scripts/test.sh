#!/usr/bin/env bash
# Run the test suite: installs the project first if needed (scripts/setup.sh is
# idempotent and quick when nothing changed), with the env extras the tests need
# (sciworld: ScienceWorld and Java; alfworld: its engine), then pytest with any arguments.
#
#   scripts/test.sh                 # everything (what CI runs)
#   scripts/test.sh -m "not slow"   # the fast tier: no servers, Ray or inference engines
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OPENMANUS_EXTRAS="sciworld,alfworld${OPENMANUS_EXTRAS:+,$OPENMANUS_EXTRAS}" bash scripts/setup.sh
PYBIN="${VIRTUAL_ENV:-$ROOT/.venv}/bin/python"
export PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
exec "$PYBIN" -m pytest --durations=25 "$@"   # the 25 slowest tests, so every run shows where the time goes
