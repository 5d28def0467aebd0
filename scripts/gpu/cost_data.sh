#!/usr/bin/env bash
# The learned GPU cost model's data, as the one command a session runs on the
# device machine (docs/runtime.md, "The learned GPU cost model"):
#
#   bash scripts/gpu/cost_data.sh [BENCH FLAGS]            # on the device, $OUT set
#   bash scripts/gpu/cost_data.sh --dry_run [BENCH FLAGS]  # anywhere: no CUDA, tiny graphs
#
# 1. Builds the engine in place where $PYTHON cannot import it yet, as
#    scripts/gpu/settings_check.sh does (no oneDNN, no cuDNN backend, no
#    -Werror; about a minute).
# 2. Runs benchmarks/gpu_cost_data.py with --out_dir=$OUT,
#    --max_seconds=$MAX_SECONDS (default 360, the torch.compile budget
#    included) and --compile_seconds=$COMPILE_SECONDS (default 45); with the
#    build, PyTorch's start and the greedy walks the call takes about 8
#    minutes. Extra arguments go to it (e.g. --budget=full, --batches=1,8).
#    It prints the JSON summary, then the table.
#
# Writes $OUT/gpu_times/<card>.jsonl and $OUT/gpu_times/graphs/ (the data,
# appended as it is timed), $OUT/cost_data.json (versions, counts, table),
# $OUT/cost_data.log (everything printed) and $OUT/build.log. Back here:
#   python experiments/fit_learned_cost.py --card=<card> --merge_from=<files_at>/gpu_times
# Environment: PYTHON (default .venv/bin/python where it exists, else
# python3), MAX_SECONDS, COMPILE_SECONDS, XFLOWRL_COMMIT.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
OUT="${OUT:-$(mktemp -d /tmp/cost_data.XXXXXX)}"
mkdir -p "$OUT"
export XFLOWRL_COMMIT="${XFLOWRL_COMMIT:-$(git rev-parse HEAD 2> /dev/null || echo unknown)}"
log() { echo "[cost_data] $*"; }
# shellcheck source=scripts/gpu/lib.sh
. scripts/gpu/lib.sh

run() {
  local start=$SECONDS
  log "$(date -u +%FT%TZ); $("$PYTHON" --version 2>&1) at $(command -v "$PYTHON"); out: $OUT"
  gpu_info "$@"
  build_engine || return 1
  "$PYTHON" benchmarks/gpu_cost_data.py --out_dir="$OUT" \
    --max_seconds="${MAX_SECONDS:-360}" --compile_seconds="${COMPILE_SECONDS:-45}" "$@"
  log "done in $((SECONDS - start)) s: $OUT/cost_data.json, $OUT/gpu_times"
}

run "$@" 2>&1 | tee "$OUT/cost_data.log"
