#!/usr/bin/env bash
# The test command: installs dependencies, builds everything (BPF objects and
# skeletons included) and runs every test with ctest. Must run as root: the
# tests load BPF programs, create TAPs and network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the tests load BPF and create namespaces)" >&2
  exit 1
fi

# Debian's own PATH: the tests run what scripts/install-deps.sh installs
# (python3 with python3-h2 and -websockets, curl, openssl), not whatever a
# user's PATH puts first. A pyenv shim in front of python3 is a bash script
# forking a dozen more per call: it took half the CPU of the integration
# tests here (InterceptTest, SsrfTest, RequestShapeTest: 128 s -> 85 s).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
scripts/install-deps.sh
# Capabilities depend only downward (tools -> broker -> userspace, vmm ->
# common, and in the order the script writes down): an upward include fails.
python3 scripts/check_includes.py
# Every C/C++ file as clang-format leaves it (.clang-format, bpf/.clang-format).
scripts/lint.sh
BUILD_DIR=${BUILD_DIR:-build}
# The tiny microVM guest the VM tests boot (Debian's cloud kernel, busybox,
# curl), from Debian packages; nothing is installed on the host's /boot. It
# needs nothing from the build (a download and an archive, about 50 s): made
# beside it, waited for before the tests.
mkdir -p "$BUILD_DIR"
guest_log=$(mktemp /tmp/zn-build-guest.XXXXXX)
scripts/build-guest.sh "$BUILD_DIR/guest" > "$guest_log" 2>&1 &
guest_pid=$!
trap 'kill "$guest_pid" 2> /dev/null || true' EXIT
start=$SECONDS
# shellcheck disable=SC2046 # the launcher arguments split on purpose
# -g1: line tables, all a failure's stack needs (full -g made the build 15 %
# slower); the package's own build keeps RelWithDebInfo's -g. -O2 (not -O1,
# which compiles 20-30 % faster): g++'s optimiser-driven warnings differ by
# level, and this is the -Werror build of optimised code.
# The test code itself at -O0 (ZN_TESTS_UNOPTIMISED, tests/CMakeLists.txt).
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZN_WERROR=ON -DZN_BUILD_TESTS=ON -DZN_BUILD_BENCH=ON \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DZN_TESTS_UNOPTIMISED=ON $(scripts/cmake_args.sh "$BUILD_DIR")
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "test.sh: build: $((SECONDS - start)) s"
# The docs' policy examples are accepted by `znctl policy check`, and every
# znctl verb they show exists (docs/*.md).
python3 scripts/check_docs.py "$BUILD_DIR"
guest_status=0
wait "$guest_pid" || guest_status=$?
cat "$guest_log"
rm -f "$guest_log"
if [ "$guest_status" -ne 0 ]; then
  echo "test.sh: scripts/build-guest.sh failed" >&2
  exit 1
fi

# Every test removes what it creates; should a test process die before it
# can, this sweeps the labs the test prefixes name (zi, zf, za, zd, znt).
sweep_test_labs() {
  local dir prefix
  for dir in /run/zeroness-lab/z*; do
    [ -d "$dir" ] || continue
    prefix=$(basename "$dir")
    case "$prefix" in
      zi[0-9]* | zf[0-9]* | za[0-9]* | zd[0-9]* | znt[0-9]*)
        echo "test.sh: sweeping leftover lab $prefix"
        "$BUILD_DIR/tools/zn-lab/zn-lab" --prefix "$prefix" down > /dev/null 2>&1 || true ;;
    esac
  done
}

# The sanitizer builds (scripts/sanitize.sh) and the fuzz targets (clang)
# need nothing from the tests, and the tests mostly wait (labs, peers,
# deadlines): the builds run beside them at the lowest CPU and I/O priority,
# so they take what the tests leave and never make a test wait for a core.
# TSan's first: its tests (mostly waiting too) start as soon as both it and
# the main tests are done, while the ASan and fuzz builds go on beside them.
# Their output goes to a log, printed if they fail.
side_log=$(mktemp /tmp/zn-side-builds.XXXXXX)
tsan_built="$side_log.tsan-built"
side_pid=
stop_side_builds() {
  if [ -n "$side_pid" ] && kill -0 "$side_pid" 2> /dev/null; then
    kill -- "-$side_pid" 2> /dev/null || kill "$side_pid" 2> /dev/null || true
    wait "$side_pid" 2> /dev/null || true
  fi
  rm -f "$side_log" "$tsan_built"
}
trap 'stop_side_builds; sweep_test_labs' EXIT
side_failed() {
  echo "test.sh: a sanitizer or fuzz build failed:" >&2
  cat "$side_log" >&2
  exit 1
}
# Their priority: lowest while tests run beside them, normal when nothing
# else of this run does (a neighbour's load on a shared machine, a CPU hog,
# would otherwise starve them: under `stress-ng --cpu 1` the ASan build at
# nice 19 got a fraction of the one core left and took most of an hour).
# Set on the whole process group (ninja and the compilers it starts next).
side_priority() {
  [ -n "$side_pid" ] || return 0
  if [ "$1" = low ]; then
    renice -n 19 -g "$side_pid" > /dev/null 2>&1 || true
    ionice -c 3 -P "$side_pid" > /dev/null 2>&1 || true
  else
    renice -n 0 -g "$side_pid" > /dev/null 2>&1 || true
    ionice -c 2 -n 4 -P "$side_pid" > /dev/null 2>&1 || true
  fi
}
start=$SECONDS
set -m  # the side builds get a process group of their own (stopped as one)
nice -n 19 ionice -c 3 bash -c 'scripts/sanitize.sh --build tsan && touch "$1" &&
  scripts/sanitize.sh --build asan && scripts/fuzz.sh --build' side-builds "$tsan_built" > "$side_log" 2>&1 &
side_pid=$!
set +m

# Tests share one machine-wide resource (the kernel); everything a test
# makes is named uniquely (labs, namespaces, pins, VM cgroups: two zerods on
# one host never share a name), so they run in parallel: the unit tests as
# many at once as there are cores, the rest (labs, zerods, VMs: mostly
# waiting on peers and deadlines, 264 CPU-s in 302 s at two at once) two at a
# time, which halved their wall time. Every test must hold with a neighbour
# and a CPU hog beside it.
# ctest counts a test whose output says "[  SKIPPED ]" as skipped and still
# exits 0: a failed suite setup (gtest 1.12 skips the suite) or a missing
# tool would go green. As root every test here can run, so a skip fails the
# run unless it names a kernel feature that is really absent ("kernel lacks
# ..."; tests/support/skip_policy.h). Each test binary enforces the same.
#
# The tests scripts/sanitize.sh runs under TSan are
# left out here: they run there, once, assertions and race detector both
# (checked below: each one left out is in the TSan build).
# shellcheck source=scripts/tsan_suites.sh
source scripts/tsan_suites.sh
tsan_re=$(tsan_regex)
junit_dir=$(realpath "$BUILD_DIR")
rm -f "$junit_dir"/ctest-junit*.xml
status=0
ctest --test-dir "$BUILD_DIR" -L unit -E "$tsan_re" -j"$(nproc)" --output-on-failure --timeout 300 \
  --output-junit "$junit_dir/ctest-junit-unit.xml" "$@" || status=$?
ctest --test-dir "$BUILD_DIR" -LE unit -E "$tsan_re" -j2 --output-on-failure --timeout 300 \
  --output-junit "$junit_dir/ctest-junit-rest.xml" "$@" || status=$?
for junit in "$junit_dir"/ctest-junit-unit.xml "$junit_dir"/ctest-junit-rest.xml; do
  python3 scripts/check_skips.py "$junit" || status=1
done
echo "test.sh: ctest: $((SECONDS - start)) s"
[ "$status" -eq 0 ] || exit "$status"

# The TSan tests, once their build is done (the ASan and fuzz builds go on).
side_priority normal
while [ ! -e "$tsan_built" ]; do
  kill -0 "$side_pid" 2> /dev/null || side_failed
  sleep 2
done
grep '^sanitize: ' "$side_log" || true
echo "test.sh: TSan build done $((SECONDS - start)) s after the tests started"
# Every test the main run left to TSan is in the TSan build (a suite name
# shared with a binary TSan does not build would otherwise run nowhere).
ctest --test-dir "$BUILD_DIR" -N -R "$tsan_re" | awk '/Test +#/ {print $3}' | sort > "$side_log.main"
ctest --test-dir "${TSAN_BUILD_DIR:-build-tsan}" -N -R "$tsan_re" | awk '/Test +#/ {print $3}' | sort > "$side_log.tsan"
if [ -n "$(comm -23 "$side_log.main" "$side_log.tsan")" ]; then
  echo "test.sh: left out of the main run but not in the TSan build:" >&2
  comm -23 "$side_log.main" "$side_log.tsan" >&2
  exit 1
fi
rm -f "$side_log.main" "$side_log.tsan"
# The proxy's and the audit's concurrency under TSan: a report fails.
tsan_start=$SECONDS
side_priority low
scripts/sanitize.sh --run tsan
echo "test.sh: TSan run: $((SECONDS - tsan_start)) s"
side_priority normal

wait "$side_pid" || { side_pid= && side_failed; }
side_pid=
grep '^sanitize: ' "$side_log" | tail -n +2 || true
echo "test.sh: side builds done $((SECONDS - start)) s after the tests started"
# The libFuzzer targets, bounded in time, on their seed corpora: a crash fails.
scripts/fuzz.sh --run
# Unit tests under ASan+UBSan: a report fails.
asan_start=$SECONDS
scripts/sanitize.sh --run asan
echo "test.sh: ASan run: $((SECONDS - asan_start)) s; all after the build: $((SECONDS - start)) s"
