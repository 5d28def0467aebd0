#!/usr/bin/env bash
# Creates .venv (if missing), installs the pinned stack and builds the native
# engine in place. Safe to run again: it only installs what is missing and
# rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
echo "[bootstrap] installing requirements.txt"
.venv/bin/pip install --disable-pip-version-check -q -r requirements.txt
echo "[bootstrap] building the native engine (xflowrl._engine) and the planner's extension (xflowrl.planning._inner)"
.venv/bin/pip install --disable-pip-version-check -q --no-build-isolation -e .
.venv/bin/python -c "import xflowrl.engine as g; print('[bootstrap] ready; cost backends:', ', '.join(g.available_backends()))"
