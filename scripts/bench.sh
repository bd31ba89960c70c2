#!/usr/bin/env bash
# The benchmark harness, one command (as root):
#
#   scripts/bench.sh [--quick] [--rounds N] [--sections a,b,...] [--build-dir DIR] [--out DIR]
#
# Installs what it needs (scripts/install-deps.sh --bench),
# builds the project (Release, in build-release/ unless --build-dir or
# BUILD_DIR say otherwise), runs every section and writes
#   bench/results/<date>.json   every figure: value, baseline, ratio, target, met
#   bench/results/<date>.md     the same as markdown tables
#   bench/results/<date>-<section>.png   ratio charts (gnuplot)
# (in DIR instead, relative to the repository, with --out DIR: trial runs).
# Every figure is a ratio to a baseline measured in the same run, alternated
# with it (A B A B ...) over N rounds (default 5), median reported. --quick is
# a short smoke run (2 rounds, short durations, 50 sessions instead of 1,000).
# Sections (bench/sections/*.sh): verdict, passthrough, control, micro,
# interception, fairness, flood. Everything runs in lab namespaces with names unique to this
# run, removed on exit; no address outside the lab is touched.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

ROUNDS=5
QUICK=0
ROUNDS_SET=0
SECTIONS="verdict,passthrough,control,micro,interception,fairness,flood"
BUILD_DIR=${BUILD_DIR:-build-release}
OUT_DIR=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --rounds)
      if [ $# -lt 2 ] || ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
        echo "bench.sh: --rounds wants a positive number" >&2
        exit 2
      fi
      ROUNDS=$2 ROUNDS_SET=1
      shift ;;
    --sections)
      [ $# -ge 2 ] || { echo "bench.sh: --sections wants a list" >&2; exit 2; }
      SECTIONS=$2
      shift ;;
    --build-dir)
      [ $# -ge 2 ] || { echo "bench.sh: --build-dir wants a directory" >&2; exit 2; }
      BUILD_DIR=$2
      shift ;;
    --out)
      [ $# -ge 2 ] || { echo "bench.sh: --out wants a directory" >&2; exit 2; }
      OUT_DIR=$2
      shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[ "$QUICK" = 1 ] && [ "$ROUNDS_SET" = 0 ] && ROUNDS=2
case $BUILD_DIR in /*) ;; *) BUILD_DIR="$REPO/$BUILD_DIR" ;; esac

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/bench.sh: run as root (it creates namespaces, TAPs and loads BPF)" >&2
  exit 1
fi

scripts/install-deps.sh --bench > /dev/null
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release > /dev/null
targets=(zn-lab zerod znctl verdict_bench policy_compile_bench flood_sender)
# policy_match_bench exists only when CMake found Google Benchmark.
# (grep reads all of it: -q would close the pipe early and fail it under pipefail)
if cmake --build "$BUILD_DIR" --target help | grep policy_match_bench > /dev/null; then
  targets+=(policy_match_bench http_bench leaf_cert_bench)
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}" > /dev/null

RESULTS_DIR=${OUT_DIR:-$REPO/bench/results}
case $RESULTS_DIR in /*) ;; *) RESULTS_DIR="$REPO/$RESULTS_DIR" ;; esac
STAMP=$(date +%Y-%m-%d-%H%M%S)
WORK=$(mktemp -d /tmp/zeroness-bench.XXXXXX)
mkdir -p "$RESULTS_DIR"
export REPO BUILD_DIR RESULTS_DIR STAMP WORK ROUNDS QUICK

# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
for f in "$REPO"/bench/sections/*.sh; do
  # shellcheck source=/dev/null
  . "$f"
done

finish() {
  local rc=$?
  trap - EXIT INT TERM
  cleanup_to 0
  sweep_labs
  if [ -f "$WORK/netns" ]; then
    sort -u "$WORK/netns" | while read -r ns; do ip netns del "$ns" 2> /dev/null || true; done
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM HUP

log "run $STAMP: sections $SECTIONS, $ROUNDS rounds$([ "$QUICK" = 1 ] && echo ", quick")"
IFS=',' read -r -a wanted <<< "$SECTIONS"
for section in "${wanted[@]}"; do
  if ! declare -F "section_$section" > /dev/null; then
    log "no section '$section'"
    record_status "$section" "$section" error "no such section"
    continue
  fi
  log "== section $section"
  start=$(date +%s)
  # A subshell per section: a failing step ends only its section, and the
  # section's own cleanup (labs, daemons) runs whatever happens. Not in an
  # `if`: there bash would ignore set -e inside the subshell.
  set +e
  (
    set -euo pipefail
    trap 'cleanup_to 0' EXIT
    trap 'exit 130' INT TERM HUP
    "section_$section"
  )
  rc=$?
  set -e
  if [ "$rc" = 0 ]; then
    log "== section $section done in $(($(date +%s) - start)) s"
  else
    [ "$rc" = 130 ] && exit 130
    log "== section $section FAILED (exit $rc)"
    record_status "$section" "section $section" error "the section failed (exit $rc); figures before the failure are kept"
  fi
done

write_results
jq -r '.figures[] | select(.status == "ok") |
  "\(.section)\t\(.name)\t\(.value) \(.unit)\t\(.ratio)x\t\(.target // "-")\t\(if .met == null then "-" elif .met then "met" else "MISSED" end)"' \
  "$RESULTS_DIR/$STAMP.json" | column -t -s $'\t' >&2 || true
jq -r '.figures[] | select(.status != "ok") | "\(.section)\t\(.name)\t\(.status): \(.why)"' \
  "$RESULTS_DIR/$STAMP.json" >&2 || true
