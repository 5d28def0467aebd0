#!/usr/bin/env bash
# The GPU check of the settings where looking ahead pays, as the one command
# a session runs on the device machine (docs/benchmark.md, "Checking the
# settings on a GPU"):
#
#   bash scripts/gpu/settings_check.sh [BENCH FLAGS]            # on the device, $OUT set
#   bash scripts/gpu/settings_check.sh --dry_run [BENCH FLAGS]  # anywhere: no CUDA
#
# 1. Refuses at once if $GRAPHS_DIR (default benchmarks/data/lookahead_graphs,
#    filled by experiments/lookahead_settings.py --export_graphs) holds no
#    exported setting.
# 2. Builds the engine in place where $PYTHON cannot import it yet:
#    `setup.py build_ext --inplace`, nothing fetched (Cython, setuptools and
#    a C++ compiler are on the device), without the optional oneDNN and
#    cuDNN cost backends (the check runs graphs in PyTorch, not the cudnn
#    cost model) and without -Werror (another compiler may warn where ours
#    does not). About a minute.
# 3. Runs benchmarks/gpu_settings_bench.py on the graphs with
#    --max_seconds=$MAX_SECONDS (default 300); extra arguments go to it
#    (e.g. --settings=NAME,...). It prints the JSON report, then the table.
#
# Writes $OUT/settings_check.json (the report), $OUT/settings_check.log
# (everything printed) and $OUT/build.log (the compiler's output; $OUT
# defaults to a new folder under /tmp). Environment: PYTHON (default
# .venv/bin/python where it exists, else python3: on the device the one that
# holds PyTorch), GRAPHS_DIR, MAX_SECONDS, and XFLOWRL_COMMIT: the commit the
# report names where the copy has no .git (else `git rev-parse`).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
GRAPHS_DIR="${GRAPHS_DIR:-benchmarks/data/lookahead_graphs}"
OUT="${OUT:-$(mktemp -d /tmp/settings_check.XXXXXX)}"
mkdir -p "$OUT"
log() { echo "[settings_check] $*"; }
# shellcheck source=scripts/gpu/lib.sh
. scripts/gpu/lib.sh

check() {
  local start=$SECONDS
  log "$(date -u +%FT%TZ); $("$PYTHON" --version 2>&1) at $(command -v "$PYTHON"); out: $OUT"
  if ! compgen -G "$GRAPHS_DIR/*.json" > /dev/null && \
     ! compgen -G "$GRAPHS_DIR/*.json.gz" > /dev/null; then
    log "FAILED: no exported settings in $GRAPHS_DIR (experiments/lookahead_settings.py" \
        "--export_graphs=$GRAPHS_DIR writes them)"
    return 1
  fi
  log "graphs: $GRAPHS_DIR ($(ls "$GRAPHS_DIR" | grep -c '\.json') files," \
      "$(du -sh "$GRAPHS_DIR" | cut -f1))"
  gpu_info "$@"
  build_engine || return 1
  "$PYTHON" benchmarks/gpu_settings_bench.py --graphs_dir="$GRAPHS_DIR" \
    --out="$OUT/settings_check.json" --max_seconds="${MAX_SECONDS:-300}" "$@"
  log "done in $((SECONDS - start)) s: $OUT/settings_check.json"
}

check "$@" 2>&1 | tee "$OUT/settings_check.log"
