#!/usr/bin/env bash
# Thin wrapper around the built zn-lab:
#   scripts/lab.sh [--prefix P] up [--guests N] | down | status | exec GUEST -- CMD...
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zn_lab="${ZN_LAB:-$repo_root/build/tools/zn-lab/zn-lab}"
if [[ ! -x "$zn_lab" ]]; then
  echo "lab.sh: $zn_lab not found; build first:" >&2
  echo "  cmake -S $repo_root -B $repo_root/build && cmake --build $repo_root/build --target zn-lab" >&2
  exit 2
fi
if [[ $EUID -ne 0 ]]; then
  echo "lab.sh: the lab creates network namespaces and needs root" >&2
  exit 2
fi
exec "$zn_lab" "$@"
