#!/usr/bin/env bash
# The GPU figure of `xflowrl optimize --device=cuda`: greedy over the zoo's
# ONNX exports at batch 1 and 16 (BERT: sequence 512, ViT: 576 patches),
# float32 and bfloat16, outputs checked and both models timed on the GPU
# (docs/cli.md, "On a GPU"), as the one command a session runs on the
# device machine:
#
#   bash scripts/gpu/optimize_check.sh [FLAGS]            # on the device, $OUT set
#   bash scripts/gpu/optimize_check.sh --dry_run [FLAGS]  # anywhere: the CPU stand-in
#
# 1. Builds the engine in place where $PYTHON cannot import it yet
#    (`setup.py build_ext --inplace`, nothing fetched, without the optional
#    oneDNN and cuDNN cost backends and without -Werror), about a minute.
# 2. Runs scripts/gpu/optimize_check.py: no TensorFlow (greedy, onnx,
#    onnxruntime, PyTorch); --max_seconds=$MAX_SECONDS (default 420) skips
#    the runs that would start later; extra flags go to it (--graphs=...,
#    --batches=1, --dtypes=float32, --cost_model=...).
#
# Writes $OUT/optimize_check.json (the environment and one row per run),
# $OUT/optimize_check.log (everything printed) and $OUT/build.log ($OUT
# defaults to a new folder under /tmp). Environment: PYTHON (default
# .venv/bin/python where it exists, else python3: on the device the one that
# holds PyTorch), MAX_SECONDS, XFLOWRL_COMMIT (the commit the report names
# where the copy has no .git).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TF_CPP_MIN_LOG_LEVEL=2
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
OUT="${OUT:-$(mktemp -d /tmp/optimize_check.XXXXXX)}"
mkdir -p "$OUT"
export XFLOWRL_COMMIT="${XFLOWRL_COMMIT:-$(git rev-parse --short HEAD 2> /dev/null || echo unknown)}"
log() { echo "[optimize_check] $*"; }
# shellcheck source=scripts/gpu/lib.sh
. scripts/gpu/lib.sh

check() {
  local start=$SECONDS
  log "$(date -u +%FT%TZ); $("$PYTHON" --version 2>&1) at $(command -v "$PYTHON"); commit $XFLOWRL_COMMIT; out: $OUT"
  gpu_info "$@"
  build_engine || return 1
  "$PYTHON" scripts/gpu/optimize_check.py --out="$OUT/optimize_check.json" \
    --max_seconds="${MAX_SECONDS:-420}" --models_dir="${MODELS_DIR:-/tmp/optimize_check_models}" "$@"
  log "done in $((SECONDS - start)) s: $OUT/optimize_check.json"
}

check "$@" 2>&1 | tee "$OUT/optimize_check.log"
