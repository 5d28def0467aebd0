#!/usr/bin/env bash
# Builds and runs the native engine's C++ unit tests (third_party/taso/tests:
# matching, candidates, the candidate coster, locations, thread safety) with
# g++ alone: the engine's sources (without the optional oneDNN and cuDNN
# backends) and the tests, with the warnings setup.py uses for the engine
# (-Wall -Wextra -Werror) and AddressSanitizer, UndefinedBehaviorSanitizer
# and (with SANITIZE=thread) ThreadSanitizer instead.
#
#   scripts/engine_tests.sh [NAME]    # NAME: run only tests whose name has it
#
# Objects are kept in build/engine_tests/ and rebuilt when a source or any
# engine header is newer; a clean build takes about a minute on two cores.
# Environment: CXX (default g++), JOBS (default: the core count),
# SANITIZE=address (default: address and undefined) or thread.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX="${CXX:-g++}"
JOBS="${JOBS:-$(nproc)}"
SANITIZE="${SANITIZE:-address}"
case "$SANITIZE" in
  address) SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" ;;
  thread) SAN="-fsanitize=thread" ;;
  *) echo "SANITIZE must be address or thread" >&2; exit 2 ;;
esac
TASO=third_party/taso
OUT="build/engine_tests/$SANITIZE"
mkdir -p "$OUT"
FLAGS="-std=c++17 -O1 -g -pthread -Wall -Wextra -Werror $SAN -I$TASO/include"
# A change of flags rebuilds everything.
if [ ! -f "$OUT/flags" ] || [ "$(cat "$OUT/flags")" != "$CXX $FLAGS" ]; then
  rm -f "$OUT"/*.o
  echo "$CXX $FLAGS" > "$OUT/flags"
fi
newest_header=$(ls -t $TASO/include/taso/*.h $TASO/tests/*.h | head -1)
sources=($TASO/src/*.cc $TASO/src/cost/*.cc $TASO/tests/*.cc)
stale=()
objects=()
for src in "${sources[@]}"; do
  obj="$OUT/$(echo "${src#$TASO/}" | tr / _).o"
  objects+=("$obj")
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_header" -nt "$obj" ]; then
    stale+=("$src:$obj")
  fi
done
if [ ${#stale[@]} -gt 0 ]; then
  echo "[engine_tests] compiling ${#stale[@]} of ${#sources[@]} sources ($JOBS at a time)"
  printf '%s\n' "${stale[@]}" | xargs -P "$JOBS" -I{} sh -c \
    'src="${1%%:*}"; obj="${1#*:}"; '"$CXX $FLAGS"' -c "$src" -o "$obj"' _ {}
fi
"$CXX" $FLAGS "${objects[@]}" -o "$OUT/engine_tests"
"$OUT/engine_tests" "$@"
