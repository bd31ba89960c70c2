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
TARGETS=(client_hello http1 policy ingress_ticket command_envelope export_verifier h2_server websocket_frame content_coding)

# Only the fuzz targets: no tests or benchmarks to build with clang.
if [ "$phase" != run ]; then
  # shellcheck disable=SC2046 # the launcher arguments split on purpose
  cmake -S . -B "$FUZZ_BUILD_DIR" -DZN_FUZZ=ON -DZN_BUILD_TESTS=OFF -DZN_BUILD_BENCH=OFF \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    $(scripts/cmake_args.sh "$FUZZ_BUILD_DIR") > /dev/null
  cmake --build "$FUZZ_BUILD_DIR" -j"$(nproc)" --target "${TARGETS[@]/%/_fuzz}"
fi
[ "$phase" = build ] && exit 0

work=$(mktemp -d /tmp/zn-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
# One target: the checked-in corpus stays as it is, new inputs go to a copy.
# Prints its last line; its status is the fuzzer's.
fuzz_one() {
  local t=$1
  mkdir -p "$work/$t"
  cp fuzz/corpus/"$t"/* "$work/$t"/
  "$FUZZ_BUILD_DIR/fuzz/${t}_fuzz" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=0 \
    -artifact_prefix="$work/$t-" "$work/$t" > "$work/$t.log" 2>&1
}
# As many targets at once as there are cores (each fuzzer is one process on
# one core): the same fuzzing time each, in a fraction of the wall time.
jobs=$(nproc)
pids=() names=()
failed=()
reap() {
  local i
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
    echo "fuzz: ${names[$i]}: $(tail -1 "$work/${names[$i]}.log")"
  done
  pids=() names=()
}
for t in "${TARGETS[@]}"; do
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s"
  fuzz_one "$t" &
  pids+=($!) names+=("$t")
  [ "${#pids[@]}" -lt "$jobs" ] || reap
done
reap
for t in "${failed[@]}"; do
  echo "fuzz: $t FAILED; the input that did it:" >&2
  tail -40 "$work/$t.log" >&2
  ls -l "$work"/"$t"-* >&2 || true
done
[ "${#failed[@]}" -eq 0 ]
