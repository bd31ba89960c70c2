#!/usr/bin/env bash
# The cmake configure arguments every script's build shares, for the build
# folder given: scripts/cmake_args.sh BUILD_DIR.
#  - ccache in front of the compilers, when installed (scripts/install-deps.sh
#    installs it): a build of unchanged sources with the same flags is a cache
#    hit, on a developer's machine and on a CI machine that keeps
#    ~/.cache/ccache.
#  - Ninja, when installed, for a folder not configured yet (a folder keeps the
#    generator it was made with). Make builds a target's objects only after the
#    targets it links are built, so the sanitizer builds kept one of two cores
#    idle much of the time: measured on 2 cores, the TSan build took 400 s
#    under make and 259 s under Ninja, the same CPU.
#  - LLVM's linker, when installed: the builds link some forty test, tool and
#    benchmark executables, each a large static link. Measured on proxy_tests:
#    GNU ld 2.5 s, lld 0.6 s; its ASan+UBSan build (250 MB) 7.4 s and 2.5 s.
set -euo pipefail
dir=${1:?usage: scripts/cmake_args.sh BUILD_DIR}
if command -v ccache > /dev/null 2>&1; then
  echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
if command -v ld.lld > /dev/null 2>&1; then
  echo "-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld"
fi
if [ ! -e "$dir/CMakeCache.txt" ] && command -v ninja > /dev/null 2>&1; then
  echo "-G Ninja"
fi
