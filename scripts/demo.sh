#!/usr/bin/env bash
# The demo: installs dependencies, builds, brings up the lab with one governed
# guest and shows what "zero network by default" means from inside it.
# Cleans up after itself. Run as root: scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/demo.sh: run as root (it creates namespaces, TAPs and loads BPF)" >&2
  exit 1
fi

scripts/install-deps.sh
cmake -S . -B "${BUILD_DIR:-build}" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "${BUILD_DIR:-build}" -j"$(nproc)" --target zn-lab > /dev/null

PREFIX=zndemo
LAB="${BUILD_DIR:-build}/tools/zn-lab/zn-lab --prefix $PREFIX"
PROBE_PID=""
cleanup() {
  [ -n "$PROBE_PID" ] && kill "$PROBE_PID" 2> /dev/null || true
  [ -n "${PROBE:-}" ] && rm -f "$PROBE"
  $LAB down > /dev/null 2>&1 || true
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
in_guest() {
  printf '$ %s\n' "$*"
  $LAB exec g0 -- sh -c "$*" 2>&1 | sed 's/^/  /' || true
}

say "Bring up the lab: a stand-in internet, a host namespace, one guest behind a TAP"
$LAB up --guests 1
$LAB status

say "From inside the guest, nothing gets out by default"
in_guest 'ping -c 1 -W 1 198.18.0.10 || echo "ping: blocked"'
in_guest 'nc -z -w 2 198.18.0.10 22 || echo "ssh port: blocked"'
in_guest 'echo hi | nc -u -w 1 198.18.0.10 443; echo "udp/443 (QUIC): sent into the void"'
in_guest 'curl -s -m 3 http://198.18.0.10/ || echo "http: no proxy listening yet -> dropped (fail closed)"'

say "HTTP/HTTPS are steered to a host socket (here a probe listener; zerod's proxy comes next)"
# IP_TRANSPARENT listener on the proxy address the datapath steers to, with
# SO_MARK 0x400 (SOL_SOCKET=1, SO_MARK=36) so its replies may reach the guest.
# socat passes the accepted socket's local address (the guest's original
# destination) to the responder as SOCAT_SOCKADDR/SOCAT_SOCKPORT.
PROBE=$(mktemp)
cat > "$PROBE" << 'EOS'
#!/bin/sh
printf 'HTTP/1.0 200 OK\r\n\r\nsteered to a host socket; original destination %s:%s\n' "$SOCAT_SOCKADDR" "$SOCAT_SOCKPORT"
EOS
chmod +x "$PROBE"
ip netns exec "$PREFIX-host" socat \
  TCP-LISTEN:15001,bind=127.0.0.1,reuseaddr,fork,ip-transparent,setsockopt-listen=1:36:1024 \
  EXEC:"$PROBE" 2> /dev/null &
PROBE_PID=$!
sleep 0.5
in_guest 'curl -s -m 3 http://198.18.0.10/'
in_guest 'curl -s -m 3 http://198.18.0.13:443/'
in_guest 'nc -z -w 2 198.18.0.10 8080 || echo "port 8080: blocked (not a steered port)"'

say "DNS to any resolver (even a hard-coded 8.8.8.8) is steered to the host; nothing answers yet"
in_guest 'dig @8.8.8.8 example.com +tries=1 +time=1 | grep -E "timed out|status" || true'

say "No secrets in the guest"
in_guest 'env | grep -i token || echo "(no token in the environment)"'

say "Why each packet died: per-session counters (zn-lab stats)"
$LAB stats g0

say "Drop events from the ring buffer (zn-lab events, rate-limited per session)"
$LAB events --seconds 3 &
EVENTS_PID=$!
sleep 0.5
$LAB exec g0 -- nc -z -w 1 198.18.0.11 5432 || true
$LAB exec g0 -- ping -c 1 -W 1 198.18.0.12 > /dev/null 2>&1 || true
wait $EVENTS_PID || true

say "Done; tearing the lab down"
