#!/usr/bin/env bash
# Installs everything the build, the tests and the demo need (Debian 12);
# with --bench also what scripts/bench.sh compares against and plots with.
# Idempotent: does nothing when all packages are present. Services packages
# ship (nginx, haproxy, iperf3, squid) are never started: the benchmark runs its
# own copies inside lab namespaces.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build lld pkg-config git ccache
  clang llvm libclang-rt-14-dev libbpf-dev bpftool clang-format clang-tidy
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  libsodium-dev nlohmann-json3-dev libspdlog-dev libssl-dev libcurl4-openssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libasio-dev libcli11-dev libsqlite3-dev libldns-dev libc-ares-dev libnghttp2-dev nghttp2-client
  iproute2 iputils-ping curl netcat-openbsd dnsutils procps socat dnsmasq-base openssl python3
  python3-websockets python3-h2 python3-wsproto python3-grpcio nginx
  qemu-system-x86 qemu-utils cryptsetup-bin e2fsprogs busybox-static cpio
  libnats-dev nats-server rsyslog rsyslog-gnutls libsystemd-dev zlib1g-dev help2man dpkg-dev libjemalloc-dev
)
if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(iperf3 haproxy wrk gnuplot-nox jq nftables squid-openssl mitmproxy)
fi

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
# Keep package scripts from starting daemons (nginx would bind :80 on the
# machine): policy-rc.d exit 101 = "action forbidden", only if none exists.
policy_rc=/usr/sbin/policy-rc.d
own_policy_rc=0
if [ ! -e "$policy_rc" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy_rc"
  chmod 755 "$policy_rc"
  own_policy_rc=1
fi
trap '[ "$own_policy_rc" = 1 ] && rm -f "$policy_rc"' EXIT
echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2> /dev/null || true
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
