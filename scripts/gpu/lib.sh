# The set-up every GPU check of scripts/gpu/ shares; sourced, not run.
# The caller sets PYTHON and OUT and defines `log`.

# The card, driver, memory, clock and temperature, unless the check's
# arguments ask for a dry run (on a machine without a GPU).
gpu_info() {
  case " $* " in
    *" --dry_run "*) ;;
    *) nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu \
         --format=csv || log "nvidia-smi failed (going on)" ;;
  esac
}

# The engine (and the planner's extension) built in place for $PYTHON (without the oneDNN and cuDNN
# backends), unless it imports already; the build's log in $OUT/build.log.
build_engine() {
  local start=$SECONDS
  if "$PYTHON" -c "import xflowrl._engine, xflowrl.planning._inner" 2> /dev/null; then
    log "engine: already built for this python"
    return 0
  fi
  log "building the engine in place (log: $OUT/build.log)"
  if ! XFLOWRL_NO_ONEDNN=1 XFLOWRL_NO_CUDNN=1 XFLOWRL_NO_WERROR=1 \
      "$PYTHON" setup.py build_ext --inplace > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    log "FAILED: engine build"
    return 1
  fi
  grep '\[xflowrl setup\]' "$OUT/build.log" || true
  log "engine built in $((SECONDS - start)) s; cost backends: $("$PYTHON" -c \
    "import xflowrl.engine as g; print(', '.join(g.available_backends()))")"
}
