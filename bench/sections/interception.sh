# shellcheck shell=bash
# Section 5 — the TLS-intercepting proxy. The section sets up the whole path
# and runs a check first (a guest curl through zerod to a rule with
# `identity` must answer 200 with the identity arriving upstream); when the
# check fails, every figure is recorded as {"status":"skipped","why":...}.
#
#   (a) ic_wrk      wrk, HTTP/1.1 keep-alive, small and 64 KiB bodies: guest ->
#                   zerod (intercepting, identity injected) -> nginx TLS upstream,
#                   vs guest -> nginx TLS-terminating reverse proxy on the host
#                   side (bench/conf/nginx-reverse-proxy.conf.in) -> same upstream
#   (b) ic_bulk     one large download through zerod (MB/s) vs
#                   `openssl speed -evp aes-128-gcm` on this machine
#   (c) ic_latency  connect + TLS + first byte (curl time_starttransfer minus
#                   name lookup), p50/p99/p99.9, through zerod vs straight to the
#                   upstream; warm (one host) and new-host (a new name each time)
#   (d) ic_audit    wrk req/s with zerod's audit on vs off
#
# Settings (environment):
#   ZN_BENCH_INTERCEPT_CONFIG  JSON merged into zerod's config for this section
#                              (e.g. the upstream trust setting the interception
#                              proxy adds); default {}. zerod also gets
#                              SSL_CERT_FILE = system CAs + the lab upstream CA.
#   ZN_BENCH_AUDIT_OFF_CONFIG  JSON merged into zerod's config for the "off"
#                              variant of (d). zerod has no audit-off setting
#                              (every verdict is audited), so unset = skipped;
#                              if zerod refuses it, skipped with zerod's error.
# Lab: upstream nginx on 198.18.0.11:443 (api.stripe.com, *.bench.example);
# g0 under zerod (session "bench"), g1 ungoverned, nginx reverse proxy on g1's
# gateway 198.19.1.1:443.

IC_UPSTREAM=198.18.0.11
IC_NAME=api.stripe.com
IC_SECRET=sk_live_bench_7f3e2a91
IC_NEW_HOSTS=1000
IC_ZG=g0  # the guest under zerod

ic_pki() {
  local d=$1
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/labca.key" \
    -out "$d/labca.pem" -days 2 -subj "/CN=zeroness bench upstream CA" 2> /dev/null
  # The upstream's certificate, and the reverse proxy's (a stand-in for
  # zerod's deployment CA: its own CA, which the guest is given).
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/rpca.key" \
    -out "$d/rpca.pem" -days 2 -subj "/CN=zeroness bench reverse-proxy CA" 2> /dev/null
  local who ca
  for who in upstream rp; do
    ca=labca
    [ "$who" = rp ] && ca=rpca
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/$who.key" -out "$d/$who.csr" \
      -subj "/CN=$IC_NAME" 2> /dev/null
    echo "subjectAltName=DNS:$IC_NAME,DNS:*.bench.example" > "$d/$who.ext"
    openssl x509 -req -in "$d/$who.csr" -CA "$d/$ca.pem" -CAkey "$d/$ca.key" -CAcreateserial \
      -out "$d/$who.pem" -days 2 -extfile "$d/$who.ext" 2> /dev/null
  done
  cat /etc/ssl/certs/ca-certificates.crt "$d/labca.pem" > "$d/trust-bundle.pem" 2> /dev/null ||
    cp "$d/labca.pem" "$d/trust-bundle.pem"
}

# ic_nginx TEMPLATE DIR NETNS ADDR CERT KEY: an nginx from a template, in a namespace.
ic_nginx() {
  local template=$1 dir=$2 netns=$3 addr=$4 cert=$5 key=$6
  mkdir -p "$dir/tmp" "$dir/www"
  sed -e "s|@DIR@|$dir|g" -e "s|@ADDR@|$addr|g" -e "s|@CERT@|$cert|g" -e "s|@KEY@|$key|g" \
    -e "s|@UPSTREAM@|$IC_UPSTREAM|g" -e "s|@NAME@|$IC_NAME|g" -e "s|@CA@|$IC_DIR/pki/labca.pem|g" \
    -e "s|@SECRET@|$IC_SECRET|g" "$REPO/bench/conf/$template" > "$dir/nginx.conf"
  ip netns exec "$netns" nginx -t -q -c "$dir/nginx.conf" -p "$dir" ||
    die "nginx -t failed for $template"
  bg_in_netns "$netns" "$dir/stdout.log" nginx -c "$dir/nginx.conf" -p "$dir" > /dev/null
  wait_tcp "$netns" "$addr" 443
}

# ic_hosts NETNS LINE...: /etc/hosts of a namespace (ip netns exec mounts
# /etc/netns/NETNS/hosts over /etc/hosts); removed with the lab.
ic_hosts() {
  local netns=$1
  shift
  [ -d /etc/netns ] || on_exit "rmdir /etc/netns"  # only if this run made it (and it is empty)
  mkdir -p "/etc/netns/$netns"
  printf '%s\n' "127.0.0.1 localhost" "$@" > "/etc/netns/$netns/hosts"
  on_exit "rm -rf /etc/netns/$netns"
}

ic_skip_all() {
  local why=$1 f
  for f in "wrk keep-alive (small, 64 KiB) vs nginx reverse proxy" "bulk MB/s vs openssl speed aes-128-gcm" \
    "connect+first-byte latency (warm, new-host)" "audit on vs off"; do
    record_status interception "$f" skipped "$why"
  done
}

ic_setup() {
  local secs=$1 zextra policy ic_extra=${ZN_BENCH_INTERCEPT_CONFIG:-}
  [ -n "$ic_extra" ] || ic_extra='{}'
  IC_PREFIX=$(lab_prefix i)
  IC_DIR="$WORK/interception"
  mkdir -p "$IC_DIR"
  lab_up "$IC_PREFIX" 2 --ungoverned
  ic_pki "$IC_DIR/pki"
  mkdir -p "$IC_DIR/upstream/www"
  head -c 65536 /dev/urandom > "$IC_DIR/upstream/www/64k.bin"
  local bulk_mib=256
  [ "$QUICK" = 1 ] && bulk_mib=32
  head -c $((bulk_mib * 1048576)) /dev/zero > "$IC_DIR/upstream/www/bulk.bin"
  IC_BULK_BYTES=$((bulk_mib * 1048576))
  ic_nginx nginx-upstream.conf.in "$IC_DIR/upstream" "$IC_PREFIX-inet" "$IC_UPSTREAM" \
    "$IC_DIR/pki/upstream.pem" "$IC_DIR/pki/upstream.key"
  ic_nginx nginx-reverse-proxy.conf.in "$IC_DIR/rp" "$IC_PREFIX-host" 198.19.1.1 \
    "$IC_DIR/pki/rp.pem" "$IC_DIR/pki/rp.key"
  # g1 reaches the reverse proxy by name (wrk takes SNI and Host from the URL).
  ic_hosts "$IC_PREFIX-g1" "198.19.1.1 $IC_NAME"

  # zerod: the lab's names, new-host names n<i>.bench.example, all on the upstream.
  zextra=$(jq -cn --arg up "$IC_UPSTREAM" --arg name "$IC_NAME" --argjson n "$IC_NEW_HOSTS" \
    --argjson extra "$ic_extra" \
    '{metrics_port: 0, dns_static: ({($name): [$up]} + ([range(0; $n) | {key: "n\(.).bench.example", value: [$up]}] | from_entries))} + $extra')
  IC_ZEROD_CONFIG_EXTRA=$zextra
  SSL_CERT_FILE="$IC_DIR/pki/trust-bundle.pem" zerod_start "$IC_PREFIX-host" "$IC_DIR/zerod" \
    "/sys/fs/bpf/zeroness-$IC_PREFIX" "$zextra"
  policy=$(jq -cn --arg name "$IC_NAME" --arg secret "$IC_SECRET" \
    '{policy: {allow: [{host: $name, identity: "cap:stripe"}, {host: "*.bench.example", identity: "cap:stripe"}]},
      resources: {stripe: {accessToken: $secret}}}')
  echo "$policy" > "$IC_DIR/policy.json"
  znctl_in "$IC_DIR/zerod" session create bench --policy "$IC_DIR/policy.json" --device zn-tap0 --slot 0 > /dev/null
  IC_GUEST_CA="$IC_DIR/zerod/state/ca/ca.pem"
}

# The check: both paths answer 200 and the identity arrives upstream.
# Returns 0 when zerod intercepts; else prints why.
ic_check() {
  local out code body
  # The peer path first: it validates the nginx configs whatever zerod does.
  out=$(guest_exec "$IC_PREFIX" g1 curl -s -m 5 --cacert "$IC_DIR/pki/rpca.pem" \
    -H "Authorization: Bearer guest-supplied" "https://$IC_NAME/small" 2>&1) || true
  if [[ $out == *"authorization=Bearer $IC_SECRET"* ]]; then
    record_meta interception_peer_check '"ok: nginx reverse proxy injects the identity"'
  else
    record_meta interception_peer_check "$(jq -cn --arg o "$out" '"failed: " + $o')"
  fi
  out=$(guest_exec "$IC_PREFIX" g0 curl -s -m 5 -o "$IC_DIR/check.body" -w '%{http_code}' \
    --cacert "$IC_GUEST_CA" "https://$IC_NAME/small" 2>&1) || true
  code=${out: -3}
  body=$(cat "$IC_DIR/check.body" 2> /dev/null || true)
  # The upstream echoes the Authorization it got; zerod scrubs an injected
  # secret from responses (secret:reflected), so the guest sees the marker
  # where the upstream put the secret: that is the proof it arrived.
  if [ "$code" = 200 ] && [[ $body == *"authorization=Bearer zn-redacted"* ]]; then
    return 0
  fi
  local reason
  reason=$(znctl_in "$IC_DIR/zerod" -j audit query --sid bench --event egress: 2> /dev/null |
    jq -r '[.. | objects | select(has("reason")) | .reason] | last // empty' 2> /dev/null || true)
  if [ "$code" = 200 ]; then
    echo "curl through zerod to an identity rule answered 200 but the identity did not arrive upstream (body: ${body:0:120})"
  else
    echo "curl through zerod to an identity rule (https://$IC_NAME/small) did not return 200 (curl: '${out:-no output}')${reason:+; zerod: $reason}"
  fi
  return 1
}

# wrk_rps PREFIX GUEST URL SECONDS: requests/s or null.
wrk_rps() {
  local out
  out=$(timeout $(($4 + 30)) "$BUILD_DIR/tools/zn-lab/zn-lab" --prefix "$1" exec "$2" -- \
    wrk -t1 -c16 -d"$4"s "$3" 2> /dev/null) || true
  # Error answers count as requests for wrk: a run with any is no figure.
  awk '/^Requests\/sec:/ {rps = $2} /Non-2xx or 3xx responses|Socket errors/ {bad = 1}
       END {if (rps == "" || bad) print "null"; else print rps}' <<< "$out"
}

# paired_ratio FILE A B: median over rounds of A/B (FILE lines: round variant value).
paired_ratio() {
  awk -v a="$2" -v b="$3" '{v[$1 " " $2] = $3} END { for (k in v) { split(k, p, " ");
    if (p[2] == a && v[p[1] " " b] != "null" && v[k] != "null" && v[p[1] " " b] > 0) print v[k] / v[p[1] " " b] } }' "$1" | median
}
variant_median() { awk -v a="$2" '$2 == a && $3 != "null" {print $3}' "$1" | median; }

ic_wrk() {
  local secs=$1 body round f="$IC_DIR/wrk.txt"
  for body in small 64k; do
    for ((round = 1; round <= ROUNDS; round++)); do
      echo "$round zerod-$body $(wrk_rps "$IC_PREFIX" "$IC_ZG" "https://$IC_NAME/$body" "$secs")" >> "$f"
      echo "$round nginx-$body $(wrk_rps "$IC_PREFIX" g1 "https://$IC_NAME/$body" "$secs")" >> "$f"
    done
    record_figure interception "wrk keep-alive /$body through zerod (identity)" req/s \
      "$(variant_median "$f" "zerod-$body")" "nginx TLS reverse proxy" "$(variant_median "$f" "nginx-$body")" \
      "$(paired_ratio "$f" "zerod-$body" "nginx-$body")" ">=" 1.0 "wrk -t1 -c16 -d${secs}s"
  done
}

ic_bulk() {
  local round f="$IC_DIR/bulk.txt" bps aes
  for ((round = 1; round <= ROUNDS; round++)); do
    bps=$(guest_exec "$IC_PREFIX" "$IC_ZG" curl -s -m 120 -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' \
      --cacert "$IC_GUEST_CA" "https://$IC_NAME/bulk" 2> /dev/null || true)
    bps=$(awk -v want="$IC_BULK_BYTES" '$1 == 200 && $2 == want {print $3; next} {print "null"}' <<< "$bps")
    echo "$round zerod $bps" >> "$f"
    # openssl speed -bytes 16384: the last line is "AES-128-GCM <n>k" (1000s of bytes/s).
    aes=$(openssl speed -evp aes-128-gcm -bytes 16384 -seconds 2 2> /dev/null |
      awk '/^(AES-128-GCM|aes-128-gcm)/ {v = $NF} END {sub(/k$/, "", v); if (v == "") print "null"; else print v * 1000}')
    echo "$round aes $(num_or_null "$aes")" >> "$f"
  done
  record_figure interception "bulk download through zerod ($((IC_BULK_BYTES / 1048576)) MiB)" MB/s \
    "$(awk '{ if ($1 == "null") print "null"; else print $1 / 1e6 }' <<< "$(variant_median "$f" zerod)")" "openssl speed -evp aes-128-gcm (16 KiB, 1 core)" \
    "$(awk '{ if ($1 == "null") print "null"; else print $1 / 1e6 }' <<< "$(variant_median "$f" aes)")" "$(paired_ratio "$f" zerod aes)"
}

# first_byte_ms PREFIX GUEST CURL-ARGS...: (time_starttransfer - time_namelookup) in ms.
first_byte_ms() {
  local prefix=$1 guest=$2 out
  shift 2
  out=$(guest_exec "$prefix" "$guest" curl -s -m 10 -o /dev/null -w '%{time_namelookup} %{time_starttransfer} %{http_code}' "$@" 2> /dev/null) || true
  awk '$3 == 200 {printf "%.3f\n", ($2 - $1) * 1000; next} {print "null"}' <<< "$out"
}

ic_latency() {
  local n=$1 i f="$IC_DIR/latency.txt" host
  for ((i = 0; i < n; i++)); do
    echo "warm zerod $(first_byte_ms "$IC_PREFIX" "$IC_ZG" --cacert "$IC_GUEST_CA" "https://$IC_NAME/small")" >> "$f"
    echo "warm direct $(first_byte_ms "$IC_PREFIX" g1 --cacert "$IC_DIR/pki/labca.pem" \
      --resolve "$IC_NAME:443:$IC_UPSTREAM" "https://$IC_NAME/small")" >> "$f"
    host="n$((i % IC_NEW_HOSTS)).bench.example"
    echo "new zerod $(first_byte_ms "$IC_PREFIX" "$IC_ZG" --cacert "$IC_GUEST_CA" "https://$host/small")" >> "$f"
    echo "new direct $(first_byte_ms "$IC_PREFIX" g1 --cacert "$IC_DIR/pki/labca.pem" \
      --resolve "$host:443:$IC_UPSTREAM" "https://$host/small")" >> "$f"
  done
  local kind p z d
  for kind in warm new; do
    for p in 50 99 99.9; do
      z=$(awk -v k="$kind" '$1 == k && $2 == "zerod" && $3 != "null" {print $3}' "$f" | percentile "$p")
      d=$(awk -v k="$kind" '$1 == k && $2 == "direct" && $3 != "null" {print $3}' "$f" | percentile "$p")
      record_figure interception "connect+first byte p$p ($kind$([ "$kind" = new ] && echo "-host"))" ms "$z" \
        "direct to upstream" "$d" "$(ratio "$z" "$d")" "" "" "$n requests each, alternated"
    done
  done
  # The target is absolute: p99 added by the enforcer, warm, within 1 ms.
  z=$(awk '$1 == "warm" && $2 == "zerod" && $3 != "null" {print $3}' "$f" | percentile 99)
  d=$(awk '$1 == "warm" && $2 == "direct" && $3 != "null" {print $3}' "$f" | percentile 99)
  local added
  added=$(awk -v z="$z" -v d="$d" 'BEGIN { if (z == "" || d == "") print "null"; else printf "%.3f\n", z - d }')
  record_figure interception "p99 added by zerod (warm)" ms "$added" "budget 1 ms" 1 "$added" "<=" 1 \
    "ratio = added ms / 1 ms budget"
}

# zerod restarted with the audit on / off (it re-adopts the session).
ic_audit() {
  local secs=$1 round f="$IC_DIR/audit.txt" off_extra err audit_off=${ZN_BENCH_AUDIT_OFF_CONFIG:-}
  if [ -z "$audit_off" ]; then
    record_status interception "audit on vs off" skipped \
      "zerod has no audit-off setting: every verdict is audited, by design (set ZN_BENCH_AUDIT_OFF_CONFIG to compare a variant)"
    return 0
  fi
  off_extra=$(jq -cn --argjson a "$IC_ZEROD_CONFIG_EXTRA" --argjson b "$audit_off" '$a + $b')
  for ((round = 1; round <= ROUNDS; round++)); do
    local mode extra
    for mode in on off; do
      extra=$IC_ZEROD_CONFIG_EXTRA
      [ "$mode" = off ] && extra=$off_extra
      kill_wait "$ZEROD_PID"
      if ! SSL_CERT_FILE="$IC_DIR/pki/trust-bundle.pem" zerod_start "$IC_PREFIX-host" "$IC_DIR/zerod" \
        "/sys/fs/bpf/zeroness-$IC_PREFIX" "$extra" 2> /dev/null; then
        err=$(tail -2 "$IC_DIR/zerod/zerod.log" | tr '\n' ' ')
        record_status interception "audit on vs off" skipped "zerod refused the audit-off config ($(jq -c . <<< "$audit_off")): $err"
        return 0
      fi
      echo "$round $mode $(wrk_rps "$IC_PREFIX" "$IC_ZG" "https://$IC_NAME/small" "$secs")" >> "$f"
    done
  done
  record_figure interception "wrk req/s, audit on" req/s "$(variant_median "$f" on)" "audit off" \
    "$(variant_median "$f" off)" "$(paired_ratio "$f" on off)"
}

section_interception() {
  local mark secs=10 n=1000 why
  mark=$(cleanup_mark)
  [ "$QUICK" = 1 ] && secs=3 n=50
  ic_setup "$secs"
  if ! why=$(ic_check); then
    log "interception: skipped — $why"
    ic_skip_all "$why"
    cleanup_to "$mark"
    return 0
  fi
  ic_wrk "$secs"
  ic_bulk
  ic_latency "$n"
  ic_audit "$secs"
  cleanup_to "$mark"
}
