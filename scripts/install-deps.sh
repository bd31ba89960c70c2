#!/usr/bin/env bash
# Installs everything the build, the tests, the demo and the benchmarks need
# (Debian 12). Idempotent: does nothing when all packages are present.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  clang llvm libbpf-dev bpftool
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  libsodium-dev nlohmann-json3-dev libspdlog-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libasio-dev libcli11-dev libsqlite3-dev libldns-dev libc-ares-dev
  iproute2 iputils-ping curl netcat-openbsd dnsutils procps socat dnsmasq-base openssl python3
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
