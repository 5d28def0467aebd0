#!/usr/bin/env bash
# Compile-and-link check of the cudnn cost backend on any Linux x86_64 machine,
# GPU or not, without a CUDA toolkit: NVIDIA's pip wheels provide the headers
# and libraries.
#
#   scripts/check_cudnn_build.sh
#
# 1. pip-installs the CUDA 12 runtime, cuDNN 9, cuBLAS, and the nvcc and CCCL
#    wheels (headers only are used from those two) into $CUDA_WHEELS_DIR
#    (default /tmp/xflowrl_cuda_wheels; about 2 GB, reused on later runs).
#    They never go into the project's venv.
# 2. Builds xflowrl._engine with TASO_WITH_CUDNN into a scratch directory (the
#    in-tree build is left alone) and checks that every CUDA symbol resolves.
# 3. Imports that build and runs tests/engine/cudnn_test.py and cost_test.py
#    against it: without a GPU, CostModel("cudnn") must raise
#    "cudnn backend: no CUDA device: ..." and cuDNN must accept the
#    descriptors of every op the zoo graphs pay for; with a GPU the
#    measurement tests run too.
#
# Environment: PYTHON (default .venv/bin/python, else python3),
# CUDA_WHEELS_DIR, KEEP=1 to keep the scratch build (its path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
WHEELS="${CUDA_WHEELS_DIR:-/tmp/xflowrl_cuda_wheels}"
OUT="$(mktemp -d /tmp/xflowrl_cudnn_check.XXXXXX)"
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$OUT"' EXIT; fi
log() { echo "[check_cudnn_build] $*"; }

PACKAGES=(
  "nvidia-cuda-runtime-cu12==12.9.*"
  "nvidia-cudnn-cu12==9.*"
  "nvidia-cublas-cu12==12.9.*"
  "nvidia-cuda-nvcc-cu12==12.9.*"   # crt/host_defines.h
  "nvidia-cuda-cccl-cu12==12.9.*"   # nv/target (included by cuda_fp16.h)
)
if [ ! -f "$WHEELS/.complete" ]; then
  log "installing ${PACKAGES[*]} into $WHEELS (about 2 GB)"
  "$PYTHON" -m pip install --disable-pip-version-check -q --no-deps --target "$WHEELS" \
    "${PACKAGES[@]}"
  touch "$WHEELS/.complete"
fi

log "building xflowrl._engine with the wheels into $OUT"
PYTHONPATH="$WHEELS" "$PYTHON" setup.py build_ext --force \
  --build-lib "$OUT/lib" --build-temp "$OUT/tmp" > "$OUT/build.log" 2>&1 || {
  tail -40 "$OUT/build.log"; log "FAILED: build"; exit 1; }
grep '\[xflowrl setup\]' "$OUT/build.log"
if ! grep -q "building the cudnn cost backend" "$OUT/build.log"; then
  log "FAILED: setup.py did not find CUDA/cuDNN/cuBLAS in $WHEELS"; exit 1
fi
if grep -n "warning:" "$OUT/build.log" | grep -i "cost/cudnn"; then
  log "FAILED: compiler warnings in the cudnn backend"; exit 1
fi

SO="$(ls "$OUT"/lib/xflowrl/_engine*.so)"
if ldd -r "$SO" 2>&1 | grep -E "not found|undefined symbol: (cuda|cudnn|cublas)"; then
  log "FAILED: unresolved CUDA libraries or symbols in $SO"; exit 1
fi
ldd "$SO" | grep -E "libcudart|libcudnn|libcublas"

# The Python package beside the scratch extension.
tar --exclude='*.so' --exclude=__pycache__ -cf - xflowrl | tar -xf - -C "$OUT/lib"
# Run from $OUT so that the in-tree package (on sys.path as the current
# directory) cannot shadow the scratch build.
REPO="$PWD"
case "$PYTHON" in
  */*) PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")" ;;
  *) PYTHON="$(command -v "$PYTHON")" ;;
esac
cd "$OUT"
export PYTHONPATH="$OUT/lib"
"$PYTHON" - <<'EOF'
import os
import xflowrl
import xflowrl.engine as g
assert xflowrl.__file__.startswith(os.environ["PYTHONPATH"]), xflowrl.__file__
assert "cudnn" in g.available_backends(), g.available_backends()
try:
    model = g.CostModel("cudnn")
except ValueError as e:
    print("[check_cudnn_build] no GPU here:", e)
    assert str(e).startswith("cudnn backend: no CUDA device: "), e
else:
    b = g.GraphBuilder()
    x = b.input(name="x", shape=(8, 64, 32, 32))
    y = b.conv2d(input=x, weight=b.weight(name="w", shape=(64, 64, 3, 3)), activation="RELU")
    graph = b.build([b.relu(input=y)])
    print("[check_cudnn_build] GPU op costs (ms):",
          dict(zip([op.type for op in graph.ops()], graph.op_costs(model))))
EOF
log "running tests/engine/cudnn_test.py and cost_test.py against the cudnn build"
"$PYTHON" "$REPO/tests/engine/cudnn_test.py"
"$PYTHON" "$REPO/tests/engine/cost_test.py"
log "OK"
