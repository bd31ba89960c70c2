#!/usr/bin/env bash
# Style checks (issue 10). CI runs the format check (scripts/test.sh).
#   scripts/lint.sh                 fail, listing them, if any C/C++ file is not clang-formatted
#   scripts/lint.sh --fix           reformat every file in place
#   scripts/lint.sh --tidy [BUILD]  clang-tidy (.clang-tidy's curated set) over src/ and tools/,
#                                   using BUILD/compile_commands.json (default: build); fails on a finding
# C++ follows .clang-format; the BPF programs (bpf/, bench/*.bpf.c) the kernel's
# style in bpf/.clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."

style_of() {
  case "$1" in
    bpf/* | *.bpf.c) echo "file:bpf/.clang-format" ;;
    *) echo "file" ;;
  esac
}

# Tracked and new (untracked, not ignored) files: a file not yet added is
# checked before it is committed.
files() { git ls-files --cached --others --exclude-standard '*.cpp' '*.h' '*.c' | grep -v '^fuzz/corpus/'; }

case "${1:-}" in
  --fix)
    files | while read -r f; do clang-format -i --style="$(style_of "$f")" "$f"; done
    ;;
  --tidy)
    build=${2:-build}
    if [ ! -f "$build/compile_commands.json" ]; then
      echo "lint.sh: $build/compile_commands.json missing (configure the build first)" >&2
      exit 1
    fi
    # A unity build's database names the batches: one naming each file.
    db=$(mktemp -d /tmp/zn-tidy-db.XXXXXX)
    trap 'rm -rf "$db"' EXIT
    python3 scripts/split_unity_db.py "$build" "$db"
    out=$(git ls-files 'src/*.cpp' 'tools/*.cpp' | xargs -P"$(nproc)" -n4 clang-tidy -p "$db" --quiet 2>/dev/null || true)
    if grep -q "warning:" <<< "$out"; then
      echo "$out" | grep -A3 "warning:" >&2
      echo "lint.sh: clang-tidy findings above" >&2
      exit 1
    fi
    echo "lint.sh: clang-tidy clean"
    ;;
  "")
    bad=()
    while read -r f; do
      clang-format --dry-run -Werror --style="$(style_of "$f")" "$f" > /dev/null 2>&1 || bad+=("$f")
    done < <(files)
    if [ "${#bad[@]}" -ne 0 ]; then
      printf 'lint.sh: not clang-formatted: %s\n' "${bad[@]}" >&2
      echo "lint.sh: run scripts/lint.sh --fix" >&2
      exit 1
    fi
    echo "lint.sh: $(files | wc -l) files formatted"
    ;;
  *)
    echo "usage: scripts/lint.sh [--fix | --tidy [BUILD_DIR]]" >&2
    exit 2
    ;;
esac
