#!/usr/bin/env bash
# The tests under sanitizers (cmake/Sanitize.cmake), each build in its own dir:
#   1. ASan + UBSan (build-asan): every test labelled unit.
#   2. TSan (build-tsan): the tests that drive the proxy's and the audit's
#      threads, zerod included: it runs as a TSan process under the tests.
# A report from any process, a test binary or a zerod it started (whose stderr
# goes to a log the test deletes), fails the run: the runtimes write reports
# to files in one directory, checked after each ctest. Called by
# scripts/test.sh (as root: the TSan tests create labs); also by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

# --build builds only, --run runs what was built (scripts/test.sh builds
# them at low priority while the main tests run); neither: both. A second
# word, asan or tsan, limits it to that one (scripts/test.sh runs the TSan
# tests as soon as their build is done, while the ASan build goes on).
phase=all
which=both
usage() {
  echo "usage: scripts/sanitize.sh [--build|--run] [asan|tsan]" >&2
  exit 2
}
case "${1:-}" in
  --build | --run)
    phase=${1#--}
    shift ;;
  asan | tsan | "") ;;
  *) usage ;;
esac
case "${1:-}" in
  asan | tsan) which=$1 ;;
  "") ;;
  *) usage ;;
esac
building() { [ "$phase" != run ]; }
running() { [ "$phase" != build ]; }
doing_asan() { [ "$which" != tsan ]; }
doing_tsan() { [ "$which" != asan ]; }

ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
JOBS=$(nproc)

# -O0 -g1: the sanitizers check the same at any level, and CI builds both
# cold (-O1 compiled the heaviest files 1.7 times slower and ran the TSan
# tests no faster: they wait on labs and timeouts, not on instrumented code);
# line tables are all a report's stack needs. NDEBUG as in CI's build, so the
# same code paths run as ship. Unity batches of 32 files, not 8: at -O0 a
# batch's time is mostly parsing the heavy headers (asio, gtest, nlohmann),
# so fewer batches cost less (the ASan build of proxy_tests and what it
# links: 289 CPU-s in batches of 8, 158 in batches of 32).
configure() {
  # shellcheck disable=SC2046 # the launcher arguments split on purpose
  cmake -S . -B "$1" -DZN_SANITIZE="$2" -DZN_WERROR=ON -DZN_BUILD_TESTS=ON -DZN_BUILD_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZN_UNITY_BATCH=32 \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" \
    $(scripts/cmake_args.sh "$1") > /dev/null
}

# Like the main run: a test that did not run (skipped without a kernel
# reason, or a suite whose setup failed) fails the stage.
check_junit() {
  python3 scripts/check_skips.py "$1" || exit 1
}

reports=$(mktemp -d /tmp/zn-sanitize.XXXXXX)
trap 'rm -rf "$reports"' EXIT
# Fails, printing them, if any process wrote a report.
check_reports() {
  if compgen -G "$reports/*" > /dev/null; then
    echo "sanitize: $1: sanitizer reports:" >&2
    for f in "$reports"/*; do
      echo "---- $(basename "$f")" >&2
      cat "$f" >&2
    done
    exit 1
  fi
}

# ---- ASan + UBSan: the unit tests ------------------------------------------
# Every test binary whose tests are labelled unit, read off the tests'
# CMakeLists: a new unit suite is covered without editing this list.
unit_re='gtest_discover_tests\(\K\w+(?=\s+PROPERTIES\s+LABELS\s+"?unit"?\s*\))'
mapfile -t unit_targets < <(grep -rhoP "$unit_re" tests --include=CMakeLists.txt | sort -u)
if [ ${#unit_targets[@]} -eq 0 ]; then
  echo "sanitize: found no unit test targets in tests/" >&2
  exit 1
fi
if doing_asan && building; then
  start=$SECONDS
  configure "$ASAN_BUILD_DIR" "address,undefined"
  cmake --build "$ASAN_BUILD_DIR" -j"$JOBS" --target "${unit_targets[@]}"
  echo "sanitize: ASan+UBSan build of ${unit_targets[*]}: $((SECONDS - start)) s"
fi

# halt_on_error: the first report ends the process (ASan and UBSan; the build
# also has -fno-sanitize-recover). detect_leaks: on (LeakSanitizer, ASan's
# default on Linux, said here on purpose): a leaked SSL, X509 or ldns object in
# the code the units test leaks per connection or query in a long-running
# zerod, and the unit tests tear everything down, so a leak is a finding.
# detect_stack_use_after_return: completion handlers and coroutines that keep
# a reference to a returned frame.
if doing_asan && running; then
  start=$SECONDS
  asan=(halt_on_error=1 detect_leaks=1 detect_stack_use_after_return=1 check_initialization_order=1
        strict_init_order=1 "log_path=$reports/asan")
  ASAN_OPTIONS=$(IFS=:; echo "${asan[*]}")
  export ASAN_OPTIONS
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
  status=0
  ctest --test-dir "$ASAN_BUILD_DIR" -L unit -j"$JOBS" --timeout 300 --no-tests=error --output-on-failure \
    --output-junit "$(realpath "$ASAN_BUILD_DIR")/ctest-junit.xml" || status=$?
  check_reports "ASan+UBSan unit tests"
  [ "$status" -eq 0 ] || exit "$status"
  check_junit "$ASAN_BUILD_DIR/ctest-junit.xml"
  unset ASAN_OPTIONS UBSAN_OPTIONS
  echo "sanitize: ASan+UBSan unit tests: $((SECONDS - start)) s"
fi

# ---- TSan: the proxy's and the audit's concurrency -------------------------
# tsan_targets, tsan_suites and tsan_regex: scripts/tsan_suites.sh.
# shellcheck source=scripts/tsan_suites.sh
source scripts/tsan_suites.sh
if doing_tsan && building; then
  start=$SECONDS
  configure "$TSAN_BUILD_DIR" thread
  cmake --build "$TSAN_BUILD_DIR" -j"$JOBS" --target "${tsan_targets[@]}"
  echo "sanitize: TSan build of ${tsan_targets[*]}: $((SECONDS - start)) s"
fi
doing_tsan && running || exit 0

# A suite renamed away would otherwise just stop being run.
regex=""
for s in "${tsan_suites[@]}"; do
  pattern="^${s//./\\.}"
  if ! ctest --test-dir "$TSAN_BUILD_DIR" -N -R "$pattern" | grep -q 'Total Tests: [1-9]'; then
    echo "sanitize: no test matches $pattern in $TSAN_BUILD_DIR" >&2
    exit 1
  fi
  regex+="${regex:+|}$pattern"
done

# TSan maps its shadow at fixed addresses that a kernel with more than 28 bits
# of mmap randomisation can collide with; without ASLR it always fits.
run=()
if [ "$(sysctl -n vm.mmap_rnd_bits 2> /dev/null || echo 28)" -gt 28 ]; then
  run=(setarch "$(uname -m)" -R)
fi
# Three at a time (ZN_TSAN_JOBS): every test's zerod, lab and peers are its
# own (the metrics port is in the lab's namespace), and these tests mostly
# wait on peers and deadlines (idle timeouts, approvals): 823 s one at a
# time, 412 s three at a time, on 2 cores.
start=$SECONDS
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$reports/tsan"
status=0
"${run[@]}" ctest --test-dir "$TSAN_BUILD_DIR" -R "$regex" -j"${ZN_TSAN_JOBS:-3}" --timeout 300 --no-tests=error \
  --output-on-failure --output-junit "$(realpath "$TSAN_BUILD_DIR")/ctest-junit.xml" || status=$?
check_reports "TSan tests"
[ "$status" -eq 0 ] || exit "$status"
check_junit "$TSAN_BUILD_DIR/ctest-junit.xml"
echo "sanitize: TSan tests: $((SECONDS - start)) s"
