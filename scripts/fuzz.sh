#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a
# bounded time on a copy of its checked-in seed corpus (fuzz/corpus/NAME/);
# a crash, leak or sanitizer report fails. Called by scripts/test.sh; also by
# hand: scripts/fuzz.sh [--build|--run] [SECONDS_PER_TARGET] (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."

# --build builds the targets only, --run runs what was built (scripts/test.sh
# builds them at low priority while the tests run); neither: both.
phase=all
case "${1:-}" in
  --build | --run)
    phase=${1#--}
    shift ;;
esac
SECONDS_PER_TARGET=${1:-${ZN_FUZZ_SECONDS:-20}}
FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
TARGETS=(client_hello http1 policy ingress_ticket command_envelope export_verifier h2_server websocket_frame)

# Only the fuzz targets: no tests or benchmarks to build with clang.
if [ "$phase" != run ]; then
  # shellcheck disable=SC2046 # the launcher arguments split on purpose
  cmake -S . -B "$FUZZ_BUILD_DIR" -DZN_FUZZ=ON -DZN_BUILD_TESTS=OFF -DZN_BUILD_BENCH=OFF \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    $(scripts/ccache_args.sh) > /dev/null
  cmake --build "$FUZZ_BUILD_DIR" -j"$(nproc)" --target "${TARGETS[@]/%/_fuzz}"
fi
[ "$phase" = build ] && exit 0

work=$(mktemp -d /tmp/zn-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
for t in "${TARGETS[@]}"; do
  # The checked-in corpus stays as it is; new inputs go to the copy.
  mkdir -p "$work/$t"
  cp fuzz/corpus/"$t"/* "$work/$t"/
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s"
  if ! "$FUZZ_BUILD_DIR/fuzz/${t}_fuzz" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=0 \
       -artifact_prefix="$work/$t-" "$work/$t" > "$work/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; the input that did it:" >&2
    tail -40 "$work/$t.log" >&2
    ls -l "$work"/"$t"-* >&2 || true
    exit 1
  fi
  tail -1 "$work/$t.log"
done
