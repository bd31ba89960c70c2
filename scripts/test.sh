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

scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j"$(nproc)"

# Tests share one machine-wide resource (the kernel); their own names are
# unique, so they may run in parallel, but TAP traffic tests are timing
# sensitive on 2 cores: run serially.
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 300 "$@"
