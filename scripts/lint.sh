#!/usr/bin/env bash
# The linter and the formatter (ruff, configured in pyproject.toml): fails on any finding or any file the
# formatter would change. scripts/test.sh (so CI) runs it before the tests. To fix what it reports:
#   .venv/bin/ruff format . && .venv/bin/ruff check --fix .
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUFF="${VIRTUAL_ENV:-$ROOT/.venv}/bin/ruff"
[[ -x "$RUFF" ]] || { echo "lint: $RUFF not found: scripts/setup.sh installs it (the test extra)" >&2; exit 2; }
"$RUFF" format --check --quiet . || { echo "lint: files above need ruff format (.venv/bin/ruff format .)" >&2; exit 1; }
"$RUFF" check --quiet .
echo "[lint] ruff format and ruff check: clean"
