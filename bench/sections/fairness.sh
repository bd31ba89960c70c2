# shellcheck shell=bash
# Section 6 — fairness between guests. Two veth guests (no frame pump) under
# one zerod, each its own session with the same policy (api.stripe.com and
# *.bench.example, identity injected, to the TLS upstream nginx of the
# interception section on 198.18.0.11:443):
#   B  measures allowed intercepted requests: N sequential curls to
#      https://api.stripe.com/small (a new connection each, warm: its leaf is
#      cached), connect + TLS + first byte (curl time_starttransfer minus name
#      lookup), p50 and p99
#   A  meanwhile floods, pinned to the last CPU (a guest's own vCPU; zerod and
#      B float), one of:
#      sni     TLS handshakes with a random SNI under the allowed wildcard
#              (r<random>.bench.example), 32 in flight: each needs a leaf, so
#              this spends A's mint budget (proxy/mint_budget.h)
#      denied  denied packets and connections as fast as one core sends them:
#              a TCP SYN to a port no rule allows and a UDP datagram, in turn,
#              to 198.18.0.12
#      dns     governed DNS queries for random names under the allowed
#              wildcard, as fast as one core sends them (issue 32: each
#              session's query rate and its queries at the resolver are
#              bounded, dns/query_handler.h); B's own lookups go to the same
#              responder
#      streams many HTTP/2 streams: h2load, 8 connections x 32 streams of
#              /64k, back to back (issue 32: a guest connection's unsent
#              bytes and upstream sockets are bounded, proxy/unsent_budget.h)
#      conns   a connection flood: TLS connections to the allowed name opened
#              as fast as one core can and held open, idle, up to 3,000
#              (issue 32: per-session connection caps)
#      trickle a slow trickle: 512 connections each sending one byte of a
#              TLS ClientHello every 2 s (issue 32: a connection that sends
#              nothing useful has a bounded lifetime)
#      sql     slow read-only SQL on A's own capability, 4 calls at a time,
#              each stopped by the store's 2 s time budget; here B measures a
#              capability KV read (https://cap.zeroness.internal/v1/kv/...)
#              instead (issue 32: capability calls are shared out per
#              session and per store, session/capability_service.h)
# The control: guest C, a veth guest zerod does not govern, sends the same
# flood outside zeroness: sni against the upstream nginx itself (a TLS server
# doing the same handshakes, no leaf to mint), denied to the same address
# (routed by the host, refused there), dns to the upstream's address (no
# resolver there: refused by the host), streams against a second nginx of
# the upstream nginx on another address of its own where it speaks HTTP/2
# (198.18.0.14; to zerod it speaks HTTP/1.1), conns and trickle against
# the upstream nginx itself, sql as the same statement in two local SQLite
# processes at a time (A's share of the store), killed at the same budget. On a 2-core host a flooder busy on one core
# slows B whoever enforces; the control measures that share.
# Per round: B alone, B with A flooding, B with C flooding, for each mode;
# each flooded p99 over the alone p99 of its triple, median over rounds, and
# the governed ratio over the control's ("net of the control").
# Target: B's p99 with a flood <= 1.10x alone (issue 11).
# Uses the interception section's helpers (ic_pki, ic_nginx, first_byte_ms_ns)
# and passthrough's pt_veth_guest; bench.sh sources every section.

FA_NAME=api.stripe.com
FA_UPSTREAM=198.18.0.11
FA_DENIED=198.18.0.12
FA_H2_CONTROL=198.18.0.14  # the control's HTTP/2 server (streams mode)
# ZN_BENCH_FA_MODES (space-separated) runs a subset.
read -r -a FA_MODES <<< "${ZN_BENCH_FA_MODES:-sni denied dns streams conns trickle sql}"
FA_CAP=cap.zeroness.internal
FA_SQL_BUDGET_S=2

# The flooder (guest A): python3, runs until SIGTERM, then prints what it did
# as one JSON line.
fa_flooder() {
  cat > "$1" <<- 'PY'
	import asyncio, json, os, random, signal, socket, ssl, sys, time

	mode, target = sys.argv[1], sys.argv[2]
	stats = {"mode": mode, "ok": 0, "failed": 0}
	start = time.monotonic()

	def report(*_):
	    for p in globals().get("procs", []):
	        p.terminate()  # timeout(1) passes it on to its statement
	    stats["seconds"] = round(time.monotonic() - start, 2)
	    print(json.dumps(stats), flush=True)
	    os._exit(0)

	signal.signal(signal.SIGTERM, report)

	if mode == "denied":
	    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	    udp.setblocking(False)
	    payload = b"x" * 64
	    while True:
	        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	        s.setblocking(False)
	        try:
	            s.connect((target, random.randint(1024, 65000)))
	        except (BlockingIOError, OSError):
	            pass
	        s.close()
	        try:
	            udp.sendto(payload, (target, random.randint(1024, 65000)))
	            stats["ok"] += 1
	        except OSError:
	            stats["failed"] += 1

	if mode == "dns":
	    import struct
	    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	    udp.setblocking(False)
	    while True:
	        name = b"r%016x.bench.example" % random.getrandbits(64)
	        qname = b"".join(bytes([len(l)]) + l for l in name.split(b".")) + b"\0"
	        query = struct.pack("!HHHHHH", random.getrandbits(16), 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)
	        try:
	            udp.sendto(query, (target, 53))
	            stats["ok"] += 1
	        except OSError:
	            stats["failed"] += 1
	        try:
	            while udp.recv(4096):
	                pass
	        except OSError:
	            pass

	def run_many(worker, n):
	    # n of the coroutine `worker` at once, until the flooder is stopped.
	    async def main():
	        await asyncio.gather(*(worker() for _ in range(n)))
	    asyncio.run(main())

	ctx = ssl.create_default_context()
	ctx.check_hostname = False
	ctx.verify_mode = ssl.CERT_NONE
	SLOW_SQL = "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c"

	if mode == "sql":
	    # Slow read-only SQL on A's own capability, 4 calls at a time (its
	    # share is fewer): each runs until the store's time budget stops it
	    # (422). "sql-local": the same statement in local SQLite processes
	    # outside zeroness (the control), killed at the same budget.
	    import threading, http.client
	    def call_through_zerod():
	        c = http.client.HTTPSConnection(sys.argv[3], 443, context=ctx, timeout=30)
	        c.request("POST", "/v1/sql/" + target, json.dumps({"sql": SLOW_SQL}), {"Content-Type": "application/json"})
	        status = c.getresponse().status
	        c.close()
	        return status in (200, 422)
	    def worker():
	        while True:
	            try:
	                ok = call_through_zerod()
	            except Exception:
	                ok = False
	            stats["ok" if ok else "failed"] += 1
	            if not ok:
	                time.sleep(0.05)
	    for _ in range(4):
	        threading.Thread(target=worker, daemon=True).start()
	    while True:
	        time.sleep(1)

	if mode == "sql-local":
	    import subprocess
	    while True:
	        procs = [subprocess.Popen(["timeout", "-s", "KILL", target, sys.executable, "-c",
	                                   "import sqlite3, sys; sqlite3.connect(':memory:').execute(sys.argv[1]).fetchall()",
	                                   SLOW_SQL]) for _ in range(2)]
	        for p in procs:
	            p.wait()
	        stats["ok"] += len(procs)


	if mode in ("conns", "trickle"):
	    import resource
	    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
	    held = []
	    stats["held_max"] = 0

	if mode == "conns":
	    # Opened as fast as they complete, then held idle: what a guest
	    # hoarding connections costs its neighbours.
	    async def opener():
	        while True:
	            if len(held) >= 3000:
	                await asyncio.sleep(0.5)
	                continue
	            try:
	                _, w = await asyncio.wait_for(
	                    asyncio.open_connection(target, 443, ssl=ctx, server_hostname=sys.argv[3]), 5)
	                held.append(w)
	                stats["ok"] += 1
	                stats["held_max"] = max(stats["held_max"], len(held))
	            except Exception:
	                stats["failed"] += 1
	                await asyncio.sleep(0.01)

	    run_many(opener, 32)

	if mode == "trickle":
	    # One byte of a ClientHello every 2 s on each of 512 connections; a
	    # connection closed by the far side is opened again.
	    hello = bytes.fromhex("16030100c8010000c40303") + os.urandom(32)

	    async def trickler():
	        while True:
	            try:
	                r, w = await asyncio.wait_for(asyncio.open_connection(target, 443), 5)
	                stats["ok"] += 1
	                for b in hello:
	                    w.write(bytes([b]))
	                    await w.drain()
	                    await asyncio.sleep(2)
	                    if r.at_eof():
	                        break
	                w.close()
	            except Exception:
	                stats["failed"] += 1
	                await asyncio.sleep(0.5)

	    run_many(trickler, 512)

	async def one():
	    while True:
	        name = "r%016x.bench.example" % random.getrandbits(64)
	        try:
	            _, w = await asyncio.wait_for(
	                asyncio.open_connection(target, 443, ssl=ctx, server_hostname=name), 5)
	            stats["ok"] += 1
	            w.transport.abort()
	        except Exception:
	            stats["failed"] += 1
	            await asyncio.sleep(0.001)

	run_many(one, 32)
	PY
}

# fa_measure NETNS N LABEL: N warm requests from B, a "LABEL MS LOOKUP_MS"
# line each: connect + first byte without the name lookup, and the lookup
# (through zerod's DNS), both "null" for a request that failed. The request:
# https://api.stripe.com/small, or B's capability KV read for the sql modes.
fa_measure() {
  local ns=$1 n=$2 label=$3 i out url="https://$FA_NAME/small"
  [[ $label == *sql ]] && url="https://$FA_CAP/v1/kv/$FA_KV_B/k"
  for ((i = 0; i < n; i++)); do
    out=$(ip netns exec "$ns" curl -s -m 10 -o /dev/null -w '%{time_namelookup} %{time_starttransfer} %{http_code}' \
      --cacert "$FA_CA" "$url" 2> /dev/null) || true
    awk -v l="$label" '$3 == 200 {printf "%s %.3f %.3f\n", l, ($2 - $1) * 1000, $1 * 1000; next} {print l " null null"}' <<< "$out"
  done
}

# fa_phase ROUND MODE N: one measurement of B, with A flooding (MODE sni or
# denied) or not (MODE alone-<x>). Prints B's p50 and p99 as "ROUND MODE p50 p99".
fa_phase() {
  local round=$1 mode=$2 n=$3 pid="" samples
  samples="$FA_DIR/samples-$round-$mode.txt"
  # Not in $(...): bg_in_netns must register the flooder's cleanup here.
  case $mode in
    alone-*) ;;
    streams | ctl-streams)
      # h2load through zerod's HTTP/2 (A, by name) or to the control's own
      # HTTP/2 server (C), in runs of 5 s until stopped (each run prints its
      # counts; the one running is stopped with the loop).
      local guest=fa url="https://$FA_NAME/64k"
      [ "$mode" = ctl-streams ] && guest=fc url="https://$FA_H2_CONTROL/64k"
      bg_in_netns "$FA_PREFIX-$guest" "$FA_DIR/flood-$round-$mode.log" taskset -c "$(($(nproc) - 1))" \
        bash -c 'trap "kill \$c 2> /dev/null; exit 0" TERM INT
          while :; do h2load -D 5 -c 8 -m 32 "$0" & c=$!; wait $c; done' "$url" > "$FA_DIR/flood.pid"
      pid=$(cat "$FA_DIR/flood.pid") ;;
    *)
      local guest=fa kind=$mode target=$FA_DENIED name=$FA_NAME
      [[ $mode == ctl-* ]] && guest=fc kind=${mode#ctl-}
      case $kind in
        sql)
          # A on its own SQL capability; C the same statement locally.
          name=$FA_CAP target=$FA_SQL_A
          [ "$guest" = fc ] && kind=sql-local target=$FA_SQL_BUDGET_S ;;
        sni | conns | trickle)
          # A by the allowed name (steered to zerod); C to the upstream itself.
          target=$FA_UPSTREAM ;;
        dns)
          # A's queries to its gateway (steered to zerod's DNS); C's to the
          # upstream's address, outside zeroness.
          [ "$guest" = fa ] && target=198.19.10.1 || target=$FA_UPSTREAM ;;
      esac
      bg_in_netns "$FA_PREFIX-$guest" "$FA_DIR/flood-$round-$mode.log" taskset -c "$(($(nproc) - 1))" \
        python3 "$FA_DIR/flood.py" "$kind" "$target" "$name" \
        > "$FA_DIR/flood.pid"
      pid=$(cat "$FA_DIR/flood.pid") ;;
  esac
  # The flood at full rate before B starts (a connection flood and a trickle
  # take longer to build up).
  if [ -n "$pid" ]; then
    case $mode in
      *conns | *trickle) sleep 5 ;;
      *) sleep 1 ;;
    esac
  fi
  fa_measure "$FA_PREFIX-fb" "$n" "$mode" > "$samples"
  if [ -n "$pid" ]; then
    kill_wait "$pid"
    log "fairness round $round: $mode: $(fa_flood_summary "$FA_DIR/flood-$round-$mode.log")"
  fi
  echo "$round $mode $(awk '$2 != "null" {print $2}' "$samples" | percentile 50) $(awk '$2 != "null" {print $2}' "$samples" | percentile 99) $(grep -c ' null$' "$samples" || true) $(awk '$3 != "null" {print $3}' "$samples" | percentile 99)"
}

# fa_flood_summary LOG: what a flooder did: the python flooder's JSON line,
# or h2load's request and traffic lines.
fa_flood_summary() {
  if grep -q '^requests:' "$1" 2> /dev/null; then
    grep -E '^(finished in|requests:|traffic:)' "$1" | tr '\n' ' '
  else
    tail -1 "$1" 2> /dev/null
  fi
}

# fa_veth_session NAME SLOT ADDR GW MAC: a veth guest adopted by zerod.
fa_veth_session() {
  local name=$1 slot=$2 addr=$3 gw=$4 mac=$5 net
  pt_veth_guest "$FA_PREFIX" "$name" "${name}0" "$addr" "$gw" "$mac"
  znctl_in "$FA_DIR/zerod" session create "bench$name" --policy "$FA_DIR/policy.json" \
    --device "${name}0" --slot "$slot" > /dev/null
  net=$(znctl_in "$FA_DIR/zerod" -j session show "bench$name")
  ip -n "$FA_PREFIX-$name" link set eth0 address "$(jq -r .network.mac <<< "$net")"
  if [ "$(jq -r .network.address <<< "$net")" != "$addr" ] || [ "$(jq -r .network.gateway <<< "$net")" != "$gw" ]; then
    die "zerod gave slot $slot $(jq -c .network <<< "$net"), not $addr via $gw"
  fi
}

section_fairness() {
  local mark n=300 round out zextra ic_extra=${ZN_BENCH_INTERCEPT_CONFIG:-}
  mark=$(cleanup_mark)
  [ "$QUICK" = 1 ] && n=50
  [ -n "$ic_extra" ] || ic_extra='{}'
  FA_PREFIX=$(lab_prefix f)
  FA_DIR="$WORK/fairness"
  # shellcheck disable=SC2034 # ic_nginx's templates read the lab CA from $IC_DIR/pki
  IC_DIR=$FA_DIR
  mkdir -p "$FA_DIR/upstream/www"
  lab_up "$FA_PREFIX" 1 --ungoverned
  ic_pki "$FA_DIR/pki"
  head -c 65536 /dev/urandom > "$FA_DIR/upstream/www/64k.bin"
  : > "$FA_DIR/upstream/www/bulk.bin"
  ic_nginx nginx-upstream.conf.in "$FA_DIR/upstream" "$FA_PREFIX-inet" "$FA_UPSTREAM" \
    "$FA_DIR/pki/upstream.pem" "$FA_DIR/pki/upstream.key"
  # The control's HTTP/2 server: the upstream nginx itself (one worker: the
  # control's flood must load the server B's requests go to, as A's does
  # through zerod), listening with http2 on an address of its own as well.
  ip -n "$FA_PREFIX-inet" addr add "$FA_H2_CONTROL/32" dev lo
  sed -i "s|^\( *\)listen $FA_UPSTREAM:443 ssl;|&\n\1listen $FA_H2_CONTROL:443 ssl http2;|" "$FA_DIR/upstream/nginx.conf"
  grep -q "listen $FA_H2_CONTROL:443 ssl http2;" "$FA_DIR/upstream/nginx.conf" ||
    die "fairness: could not add the control's HTTP/2 listener to the upstream nginx config"
  ip netns exec "$FA_PREFIX-inet" nginx -t -q -c "$FA_DIR/upstream/nginx.conf" -p "$FA_DIR/upstream" ||
    die "nginx -t failed with the control's HTTP/2 listener"
  ip netns exec "$FA_PREFIX-inet" nginx -c "$FA_DIR/upstream/nginx.conf" -p "$FA_DIR/upstream" -s reload
  wait_tcp "$FA_PREFIX-inet" "$FA_H2_CONTROL" 443
  # The SQL store of the sql mode (read-only: A only reads it).
  python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("create table if not exists t(x)")' \
    "$FA_DIR/bench.db"
  zextra=$(jq -cn --arg up "$FA_UPSTREAM" --arg name "$FA_NAME" --arg db "$FA_DIR/bench.db" \
    --argjson budget "$((FA_SQL_BUDGET_S * 1000))" --argjson extra "$ic_extra" \
    '{metrics_port: 0, dns_static: {($name): [$up]},
      stores: {sql: {bench: {path: $db, time_budget_ms: $budget}}}} + $extra')
  SSL_CERT_FILE="$FA_DIR/pki/trust-bundle.pem" zerod_start "$FA_PREFIX-host" "$FA_DIR/zerod" \
    "/sys/fs/bpf/zeroness-$FA_PREFIX" "$zextra"
  jq -n --arg name "$FA_NAME" --arg secret "$IC_SECRET" \
    '{policy: {allow: [{host: $name, identity: "cap:stripe"}, {host: "*.bench.example", identity: "cap:stripe"}]},
      resources: {stripe: {accessToken: $secret}},
      caps: {kv: {kind: "kv", mode: "rw"}, db: {kind: "sql", db: "bench"}}}' > "$FA_DIR/policy.json"
  fa_veth_session fa 10 198.19.10.2/24 198.19.10.1 02:00:00:00:00:00
  fa_veth_session fb 11 198.19.11.2/24 198.19.11.1 02:00:00:00:00:00
  pt_veth_guest "$FA_PREFIX" fc fc0 198.19.12.2/24 198.19.12.1 02:00:00:00:12:02  # ungoverned
  FA_CA="$FA_DIR/zerod/state/ca/ca.pem"
  FA_SQL_A=$(znctl_in "$FA_DIR/zerod" -j session show benchfa | jq -r .guest_env.ZN_CAP_DB)
  FA_KV_B=$(znctl_in "$FA_DIR/zerod" -j session show benchfb | jq -r .guest_env.ZN_CAP_KV)
  fa_flooder "$FA_DIR/flood.py"

  # The sql mode's paths work: B's key is stored and read back, and A's
  # slow statement is stopped by its budget (422), not refused otherwise.
  out=$(ip netns exec "$FA_PREFIX-fb" curl -s -m 10 -X PUT --data-binary v -o /dev/null -w '%{http_code}' \
    --cacert "$FA_CA" "https://$FA_CAP/v1/kv/$FA_KV_B/k" 2>&1) || true
  [ "$out" = 204 ] || die "fairness: guest B cannot store its KV key through zerod ($out)"
  out=$(ip netns exec "$FA_PREFIX-fb" curl -s -m 10 --cacert "$FA_CA" "https://$FA_CAP/v1/kv/$FA_KV_B/k" 2>&1) || true
  [ "$out" = v ] || die "fairness: guest B cannot read its KV key back through zerod ($out)"
  out=$(ip netns exec "$FA_PREFIX-fa" curl -s -m 10 -o /dev/null -w '%{http_code}' --cacert "$FA_CA" \
    -d '{"sql": "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c"}' \
    "https://$FA_CAP/v1/sql/$FA_SQL_A" 2>&1) || true
  [ "$out" = 422 ] || die "fairness: guest A's slow SQL call was not stopped by its budget ($out)"

  # The check: B's request answers 200 with the identity arriving upstream
  # (zerod scrubs it from the echo: the marker is the proof).
  out=$(ip netns exec "$FA_PREFIX-fb" curl -s -m 10 -w ' code=%{http_code}' --cacert "$FA_CA" \
    "https://$FA_NAME/echo" 2>&1) || true
  if [[ $out != *"authorization=Bearer zn-redacted"*"code=200" ]]; then
    local why="curl from guest B through zerod to an identity rule failed: ${out:0:200}"
    log "fairness: skipped — $why"
    record_status fairness "B's p99 with A flooding (random SNIs, denied, DNS, HTTP/2 streams, connections, trickle, slow SQL)" skipped "$why"
    cleanup_to "$mark"
    return 0
  fi

  # The control's path works: ungoverned C reaches the upstream nginx itself.
  out=$(ip netns exec "$FA_PREFIX-fc" curl -sk -m 10 -o /dev/null -w '%{http_code}' "https://$FA_UPSTREAM/small" 2>&1) || true
  [ "$out" = 200 ] || die "fairness: ungoverned guest C cannot reach https://$FA_UPSTREAM/small ($out)"

  # The control's HTTP/2 path works: C gets /64k over h2 from its server.
  out=$(ip netns exec "$FA_PREFIX-fc" curl -sk --http2 -m 10 -o /dev/null -w '%{http_version} %{http_code}' \
    "https://$FA_H2_CONTROL/64k" 2>&1) || true
  [ "$out" = "2 200" ] || die "fairness: ungoverned guest C gets no HTTP/2 from https://$FA_H2_CONTROL/64k ($out)"

  local f="$FA_DIR/rounds.txt" mode
  for ((round = 1; round <= ROUNDS; round++)); do
    for mode in "${FA_MODES[@]}"; do
      {
        fa_phase "$round" "alone-$mode" "$n"
        fa_phase "$round" "$mode" "$n"
        fa_phase "$round" "ctl-$mode" "$n"
      } >> "$f"
    done
  done
  fa_report "$f" "$n"
  cleanup_to "$mark"
}

# fa_ratio FILE MODE BASE COL: per round, column COL of MODE over that of
# BASE, median over rounds ("null" if no round has both).
fa_ratio() {
  awk -v m="$2" -v b="$3" -v c="$4" '{v[$1 " " $2] = $c} END { for (k in v) { split(k, a, " ");
      if (a[2] == m && v[a[1] " " b] != "null" && v[k] != "null" && v[a[1] " " b] > 0)
        print v[k] / v[a[1] " " b] } }' "$1" | median
}

# fa_rate MODE: what the flooder achieved, averaged over its phases:
# attempts/s and completed/s (a handshake refused for want of a mint token is
# an attempt only).
fa_rate() {
  if [ "${1#ctl-}" = streams ]; then
    # h2load's own lines: "requests: N total, N started, N done, N succeeded, ..."
    cat "$FA_DIR"/flood-*-"$1".log 2> /dev/null | awk '/^finished in/ {s += $3 + 0} /^requests:/ {d += $8}
      END { if (s > 0) printf "%d/s HTTP/2 requests of 64 KiB completed\n", d / s; else print "no report" }'
    return
  fi
  cat "$FA_DIR"/flood-*-"$1".log 2> /dev/null | jq -rs --arg what "${1#ctl-}" \
    'map(select(.seconds? > 0)) | if length == 0 then "no report" else
      "\(map((.ok + .failed) / .seconds) | add / length | floor)/s \(if $what == "sni" then "TLS handshakes attempted" elif $what == "dns" then "DNS queries" elif $what == "conns" then "TLS connections attempted" elif $what == "trickle" then "trickling connections opened" elif $what == "sql" then "slow SQL calls (answered by the budget or refused busy)" else "SYN+UDP pairs" end), \(map(.ok / .seconds) | add / length | floor)/s completed\(if $what == "conns" then ", at most \(map(.held_max // 0) | max) held" else "" end)" end' \
    2> /dev/null || echo "no report"
}

# fa_report FILE N: FILE lines "round mode p50 p99 failed lookup-p99".
fa_report() {
  local f=$1 n=$2 mode p col what alone flooded control r rc net failed
  for mode in "${FA_MODES[@]}"; do
    case $mode in
      sni) what="random SNIs under an allowed wildcard" ;;
      denied) what="denied packets and connections" ;;
      dns) what="DNS queries for random names under an allowed wildcard" ;;
      streams) what="HTTP/2 streams (8 connections x 32)" ;;
      conns) what="a flood of held TLS connections" ;;
      trickle) what="512 connections trickling a byte every 2 s" ;;
      sql) what="slow SQL calls on its capability" ;;
    esac
    local bwhat="connect+first byte"
    [ "$mode" = sql ] && bwhat="capability KV read, connect+first byte"
    failed=$(awk -v m="$mode" '$2 == m || $2 == "alone-" m || $2 == "ctl-" m {s += $5} END {print s + 0}' "$f")
    for p in 50 99; do
      col=3
      [ "$p" = 99 ] && col=4
      alone=$(awk -v m="alone-$mode" -v c="$col" '$2 == m && $c != "null" {print $c}' "$f" | median)
      flooded=$(awk -v m="$mode" -v c="$col" '$2 == m && $c != "null" {print $c}' "$f" | median)
      control=$(awk -v m="ctl-$mode" -v c="$col" '$2 == m && $c != "null" {print $c}' "$f" | median)
      r=$(fa_ratio "$f" "$mode" "alone-$mode" "$col")
      rc=$(fa_ratio "$f" "ctl-$mode" "alone-$mode" "$col")
      net=$(fa_ratio "$f" "$mode" "ctl-$mode" "$col")
      if [ "$p" = 99 ]; then
        record_figure fairness "guest B p99 $bwhat, A flooding $what (veth)" ms "$flooded" \
          "B alone" "$alone" "$r" "<=" 1.10 \
          "$n requests a phase; A: $(fa_rate "$mode"); the same flood from ungoverned C: ${rc}x; $failed of B's requests failed"
        record_figure fairness "control: guest B p99, ungoverned C flooding $what outside zeroness (veth)" ms \
          "$control" "B alone" "$alone" "$rc" "" "" "C: $(fa_rate "ctl-$mode"); what a flooding neighbour costs B on this host without zeroness"
        record_figure fairness "guest B p99, A flooding $what, net of the control (veth)" ms "$flooded" \
          "B with C flooding" "$control" "$net" "<=" 1.10 "per-round ratio of B's p99 with governed A flooding to B's p99 with ungoverned C flooding"
      else
        record_figure fairness "guest B p50 $bwhat, A flooding $what (veth)" ms "$flooded" \
          "B alone" "$alone" "$r" "" "" "$n requests a phase; the same flood from ungoverned C: ${rc}x"
      fi
    done
    # B's own name lookups (through zerod's DNS; the control's through the
    # same, with C flooding outside it).
    alone=$(awk -v m="alone-$mode" '$2 == m && $6 != "" && $6 != "null" {print $6}' "$f" | median)
    flooded=$(awk -v m="$mode" '$2 == m && $6 != "" && $6 != "null" {print $6}' "$f" | median)
    control=$(awk -v m="ctl-$mode" '$2 == m && $6 != "" && $6 != "null" {print $6}' "$f" | median)
    net=$(fa_ratio "$f" "$mode" "ctl-$mode" 6)
    record_figure fairness "guest B p99 name lookup, A flooding $what, net of the control (veth)" ms "$flooded" \
      "B with C flooding" "$control" "$net" "<=" 1.10 "B alone: $alone ms; curl's name lookup (A and AAAA) of each request"
  done
}
