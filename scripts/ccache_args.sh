#!/usr/bin/env bash
# The cmake arguments that put ccache in front of the compilers, when it is
# installed (scripts/install-deps.sh installs it): a build of unchanged
# sources with the same flags is then a cache hit, on a developer's machine
# and on a CI machine that keeps ~/.cache/ccache. Prints nothing otherwise.
if command -v ccache > /dev/null 2>&1; then
  echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
