# shellcheck shell=bash
# Section 5 — the TLS-intercepting proxy. The section sets up the whole path
# and runs a check first (a guest curl through zerod to a rule with
# `identity` must answer 200 with the identity arriving upstream); when the
# check fails, every figure is recorded as {"status":"skipped","why":...}.
# Each peer has its own check (one curl through it answers 200 with the
# identity arriving upstream); a peer that fails it has its figures skipped.
#
#   (a) ic_wrk      wrk, HTTP/1.1 keep-alive, small and 64 KiB bodies: guest ->
#                   zerod (intercepting, identity injected) -> nginx TLS upstream,
#                   vs the same through three peers, each injecting the same
#                   identity and re-encrypting to the same upstream:
#                   - nginx as a TLS-terminating reverse proxy on the host side
#                     (bench/conf/nginx-reverse-proxy.conf.in); target >= 1.0x
#                   - squid ssl-bump (bench/conf/squid-ssl-bump.conf.in), the
#                     proxy a user would pick for interception; target >= 2x
#                   - mitmproxy (mitmdump + bench/conf/mitmproxy-identity.py.in),
#                     for reference, no target
#                   squid and mitmproxy run in *intercept* (transparent) mode:
#                   wrk has no proxy support (no CONNECT), so an nft REDIRECT in
#                   the lab's host namespace sends the guest's TCP 443 to them
#                   (squid `https_port ... intercept ssl-bump`, mitmdump
#                   `--mode transparent`); each mints leaves from its own CA,
#                   which its guest is given.
#                   Then /echo, whose responses carry the injected secret back
#                   (each one a secret:reflected alarm that zerod scrubs and
#                   records), zerod vs nginx, no target: the upstream of the
#                   other figures echoes no credential, as an API does not.
#                   Beside each: the proxy's CPU time per request (zerod's
#                   threads by name: loops, audit writer, the rest) against
#                   the nginx reverse proxy's (and per new connection in
#                   (f)).
#   (b) ic_bulk     one large download through zerod (MB/s) vs
#                   `openssl speed -evp aes-128-gcm` on this machine
#   (c) ic_latency  connect + TLS + first byte (curl time_starttransfer minus
#                   name lookup), p50/p99/p99.9, through zerod vs straight to the
#                   upstream; warm (one host) and new-host (a new name each time);
#                   p99 added by zerod: budget 1 ms warm, 2 ms new-host
#   (d) ic_audit    wrk req/s with zerod's audit on vs off
#   (e) ic_h2load   h2load (HTTP/2, 4 connections x 10 streams) through zerod
#                   (each stream one request, identity injected, HTTP/1.1 to the
#                   upstream) vs the nginx reverse proxy serving h2 the same way;
#                   no target (issue 17 asks for the ratio)
#   (f) ic_handshakes new TLS connections per second from a guest, each with
#                   one request (bench/tls_connect_rate.py: Python's ssl, SNI,
#                   verification, Connection: close), full handshakes and
#                   resumed ones (the previous connection's session offered;
#                   TLS 1.3, and TLS 1.2 whose abbreviated handshake the client
#                   ends), through zerod
#                   vs the nginx reverse proxy; target >= 1.0x
# (a) and (c) are measured twice: from lab guests (TAP + the lab's userspace
# frame pump, which caps a guest near 1 Gbit/s and adds latency) and from
# veth guests (a veth pair into the host namespace, no pump), labelled
# "(veth)".
#
# Settings (environment):
#   ZN_BENCH_INTERCEPT_CONFIG  JSON merged into zerod's config for this section
#                              (e.g. the upstream trust setting the interception
#                              proxy adds); default {}. zerod also gets
#                              SSL_CERT_FILE = system CAs + the lab upstream CA.
#   ZN_BENCH_IC_PARTS          which parts run (comma list: wrk, h2load,
#                              handshakes, bulk, latency, audit); unset: all
#   ZN_BENCH_PERF              a directory: zerod's first round of each wrk
#                              and h2load figure (and of the veth bulk
#                              download) is profiled there (perf
#                              record, DWARF call graphs, one file per figure;
#                              perf report -i; that round is slowed a little)
#   ZN_BENCH_HOLD              a file: once the lab is up, it is held as it is
#                              while the file exists (ic_hold), before any
#                              figure
#   ZN_BENCH_AUDIT_OFF_CONFIG  JSON merged into zerod's config for the "off"
#                              variant of (d). zerod has no audit-off setting
#                              (every verdict is audited), so unset = skipped;
#                              if zerod refuses it, skipped with zerod's error.
# Lab: upstream nginx on 198.18.0.11:443 (api.stripe.com, *.bench.example).
# Lab guests: g0 under zerod (session "bench"); ungoverned g1 -> nginx reverse
# proxy on its gateway 198.19.1.1:443; g2 -> squid (REDIRECT on zn-tap2 to
# :3129); g3 -> mitmproxy (REDIRECT on zn-tap3 to :8081).
# Veth guests: vz under zerod (session "benchv", slot 10, 198.19.10.2);
# ungoverned vd -> nginx reverse proxy on 198.19.11.1:443; vs -> squid
# (REDIRECT on vs0); vm -> mitmproxy (REDIRECT on vm0). squid and mitmproxy
# are one process each, serving the lab and the veth guest; all of them are
# started and stopped by this section in the lab's host namespace, logs in
# the run's work dir.

IC_UPSTREAM=198.18.0.11
IC_NAME=api.stripe.com
IC_SECRET=sk_live_bench_7f3e2a91
IC_NEW_HOSTS=1000
IC_ZG=g0  # the guest under zerod
IC_SQUID_PORT=3129
IC_MITM_PORT=8081
IC_SQUID_USER=proxy  # Debian's squid user
# The variants of (a): each is a guest namespace suffix (its peer follows from
# the guest: see the header).
declare -A IC_NS_OF=([zerod]=g0 [nginx]=g1 [squid]=g2 [mitmproxy]=g3
  [veth-zerod]=vz [veth-nginx]=vd [veth-squid]=vs [veth-mitmproxy]=vm)
declare -A IC_PEER_NAME=([nginx]="nginx TLS reverse proxy" [squid]="squid ssl-bump (intercept)"
  [mitmproxy]="mitmproxy (transparent)")
# Why a variant cannot be measured (its check failed); empty when it can.
declare -A IC_BROKEN=()
IC_PEER_PIDS=()  # squid and mitmdump, stopped once their figures are taken

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
  for f in "wrk keep-alive (small, 64 KiB) vs nginx reverse proxy" \
    "wrk keep-alive (small, 64 KiB) vs squid ssl-bump" "wrk keep-alive (small, 64 KiB) vs mitmproxy" \
    "bulk MB/s vs openssl speed aes-128-gcm" "connect+first-byte latency (warm, new-host)" \
    "h2load (HTTP/2, 4 conns x 10 streams) through zerod (identity)" \
    "wrk keep-alive and connect+first-byte latency (veth)" "audit on vs off" \
    "new TLS connections/s from a guest (full, resumed; lab and veth)"; do
    record_status interception "$f" skipped "$why"
  done
}

ic_setup() {
  local secs=$1 zextra policy ic_extra=${ZN_BENCH_INTERCEPT_CONFIG:-}
  [ -n "$ic_extra" ] || ic_extra='{}'
  IC_PREFIX=$(lab_prefix i)
  IC_DIR="$WORK/interception"
  mkdir -p "$IC_DIR"
  lab_up "$IC_PREFIX" 4 --ungoverned
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
  # g1 reaches the reverse proxy by name (wrk takes SNI and Host from the URL);
  # g2 and g3 the upstream itself, where the REDIRECT catches them.
  ic_hosts "$IC_PREFIX-g1" "198.19.1.1 $IC_NAME"
  ic_hosts "$IC_PREFIX-g2" "$IC_UPSTREAM $IC_NAME"
  ic_hosts "$IC_PREFIX-g3" "$IC_UPSTREAM $IC_NAME"

  # zerod: the lab's names, new-host names n<i>.bench.example, all on the
  # upstream (twice IC_NEW_HOSTS: the veth guest's new hosts are names the lab
  # guest never used).
  zextra=$(jq -cn --arg up "$IC_UPSTREAM" --arg name "$IC_NAME" --argjson n "$((2 * IC_NEW_HOSTS))" \
    --argjson extra "$ic_extra" \
    '{metrics_port: 0,
      dns_static: ({($name): [$up]} + ([range(0; $n) | {key: "n\(.).bench.example", value: [$up]}] | from_entries))} + $extra')
  IC_ZEROD_CONFIG_EXTRA=$zextra
  SSL_CERT_FILE="$IC_DIR/pki/trust-bundle.pem" zerod_start "$IC_PREFIX-host" "$IC_DIR/zerod" \
    "/sys/fs/bpf/zeroness-$IC_PREFIX" "$zextra"
  policy=$(jq -cn --arg name "$IC_NAME" --arg secret "$IC_SECRET" \
    '{policy: {allow: [{host: $name, identity: "cap:stripe"}, {host: "*.bench.example", identity: "cap:stripe"}]},
      resources: {stripe: {accessToken: $secret}}}')
  echo "$policy" > "$IC_DIR/policy.json"
  znctl_in "$IC_DIR/zerod" session create bench --policy "$IC_DIR/policy.json" --device zn-tap0 --slot 0 > /dev/null
  IC_GUEST_CA="$IC_DIR/zerod/state/ca/ca.pem"
  ic_veth_setup
  ic_peers_setup
}

# The veth guests (no frame pump): vz adopted by zerod (session benchv on its
# veth, addresses from the session), vd/vs/vm ungoverned, each reaching its
# peer the way its lab twin does.
ic_veth_setup() {
  local net
  pt_veth_guest "$IC_PREFIX" vz vz0 198.19.10.2/24 198.19.10.1 02:00:00:00:00:00
  znctl_in "$IC_DIR/zerod" session create benchv --policy "$IC_DIR/policy.json" --device vz0 --slot 10 > /dev/null
  net=$(znctl_in "$IC_DIR/zerod" -j session show benchv)
  ip -n "$IC_PREFIX-vz" link set eth0 address "$(jq -r .network.mac <<< "$net")"
  if [ "$(jq -r .network.address <<< "$net")" != 198.19.10.2/24 ] || [ "$(jq -r .network.gateway <<< "$net")" != 198.19.10.1 ]; then
    die "zerod gave slot 10 $(jq -c .network <<< "$net"), not 198.19.10.2/24 via .1"
  fi
  pt_veth_guest "$IC_PREFIX" vd vd0 198.19.11.2/24 198.19.11.1 02:00:00:00:11:02
  pt_veth_guest "$IC_PREFIX" vs vs0 198.19.12.2/24 198.19.12.1 02:00:00:00:12:02
  pt_veth_guest "$IC_PREFIX" vm vm0 198.19.13.2/24 198.19.13.1 02:00:00:00:13:02
  ic_nginx nginx-reverse-proxy.conf.in "$IC_DIR/rp-veth" "$IC_PREFIX-host" 198.19.11.1 \
    "$IC_DIR/pki/rp.pem" "$IC_DIR/pki/rp.key"
  ic_hosts "$IC_PREFIX-vd" "198.19.11.1 $IC_NAME"
  ic_hosts "$IC_PREFIX-vs" "$IC_UPSTREAM $IC_NAME"
  ic_hosts "$IC_PREFIX-vm" "$IC_UPSTREAM $IC_NAME"
}

# squid ssl-bump and mitmproxy in the lab's host namespace, each behind an nft
# REDIRECT of its guests' TCP 443 (the table goes with the namespace, and on
# cleanup). A peer that does not come up is marked broken, with why.
ic_peers_setup() {
  local d
  ip netns exec "$IC_PREFIX-host" nft -f - <<- NFT
	table ip zn_bench_peers {
	  chain prerouting {
	    type nat hook prerouting priority dstnat; policy accept;
	    iifname { "zn-tap2", "vs0" } tcp dport 443 redirect to :$IC_SQUID_PORT
	    iifname { "zn-tap3", "vm0" } tcp dport 443 redirect to :$IC_MITM_PORT
	  }
	}
	NFT
  on_exit "ip netns exec $IC_PREFIX-host nft delete table ip zn_bench_peers"

  # squid: its own CA (the guest's trust) and certificate db. squid refuses
  # to run as root and the work dir is root's alone (0700), so its files live
  # in a directory of its user next to the work dir, linked from it.
  d="$WORK-squid"
  on_exit "rm -rf $d"
  mkdir -m 700 "$d"
  ln -s "$d" "$IC_DIR/squid"
  cp "$IC_DIR/pki/labca.pem" "$d/upstream-ca.pem"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" \
    -out "$d/ca.pem" -days 2 -subj "/CN=zeroness bench squid CA" 2> /dev/null
  /usr/lib/squid/security_file_certgen -c -s "$d/ssl_db" -M 16MB > "$d/certgen.log" 2>&1
  echo "$IC_UPSTREAM $IC_NAME" > "$d/hosts"
  sed -e "s|@DIR@|$d|g" -e "s|@PORT@|$IC_SQUID_PORT|g" -e "s|@CA_CERT@|$d/ca.pem|g" -e "s|@CA_KEY@|$d/ca.key|g" \
    -e "s|@UPSTREAM_CA@|$d/upstream-ca.pem|g" -e "s|@SECRET@|$IC_SECRET|g" -e "s|@USER@|$IC_SQUID_USER|g" \
    "$REPO/bench/conf/squid-ssl-bump.conf.in" > "$d/squid.conf"
  chown -R "$IC_SQUID_USER:" "$d"
  if ! ip netns exec "$IC_PREFIX-host" squid -k parse -f "$d/squid.conf" > "$d/parse.log" 2>&1; then
    ic_break squid "squid -k parse failed: $(grep -m1 -iE 'fatal|error' "$d/parse.log")"
  else
    # A service name of this run: squid names its shared memory after it.
    local service="zb$$squid"
    on_exit "rm -f /dev/shm/$service-*"
    # Not in $(...): bg_in_netns must register the cleanup here.
    bg_in_netns "$IC_PREFIX-host" "$d/stdout.log" squid -N -n "$service" -f "$d/squid.conf" > "$d/pid"
    IC_PEER_PIDS+=("$(cat "$d/pid")")
    wait_listen "$IC_PREFIX-host" "$IC_SQUID_PORT" ||
      ic_break squid "squid did not listen (cache.log: $(tail -2 "$d/cache.log" 2> /dev/null | tr '\n' ' '))"
  fi

  # mitmproxy: its own CA too (key and certificate in one file in its confdir).
  d="$IC_DIR/mitmproxy"
  mkdir -p "$d/conf"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" \
    -out "$d/ca.pem" -days 2 -subj "/CN=zeroness bench mitmproxy CA" 2> /dev/null
  cat "$d/ca.key" "$d/ca.pem" > "$d/conf/mitmproxy-ca.pem"
  sed -e "s|@SECRET@|$IC_SECRET|g" "$REPO/bench/conf/mitmproxy-identity.py.in" > "$d/identity.py"
  bg_in_netns "$IC_PREFIX-host" "$d/mitmdump.log" mitmdump -q --mode transparent \
    --listen-host 0.0.0.0 --listen-port "$IC_MITM_PORT" --set confdir="$d/conf" \
    --set ssl_verify_upstream_trusted_ca="$IC_DIR/pki/labca.pem" -s "$d/identity.py" > "$d/pid"
  IC_PEER_PIDS+=("$(cat "$d/pid")")
  wait_listen "$IC_PREFIX-host" "$IC_MITM_PORT" ||
    ic_break mitmproxy "mitmdump did not listen ($(tail -2 "$d/mitmdump.log" | tr '\n' ' '))"
  return 0
}

# ic_break PEER WHY: the peer's variants (lab and veth) cannot be measured.
ic_break() {
  IC_BROKEN[$1]=$2
  IC_BROKEN[veth-$1]=$2
  log "interception: $1 unavailable: $2"
}

# ic_peer_check VARIANT CA: one curl from the variant's guest through its peer
# (with a guest-supplied credential) must answer 200 with the identity, and
# only it, arriving upstream. Marks the variant broken otherwise.
ic_peer_check() {
  local v=$1 ca=$2 out
  [ -z "${IC_BROKEN[$v]:-}" ] || return 0
  out=$(ip netns exec "$IC_PREFIX-${IC_NS_OF[$v]}" curl -s -m 10 --cacert "$ca" \
    -H "Authorization: Bearer guest-supplied" -w ' code=%{http_code}' "https://$IC_NAME/echo" 2>&1) || true
  if [[ $out == *"authorization=Bearer $IC_SECRET "*"code=200" ]]; then
    record_meta "interception_check_$v" '"ok: 200, the identity arrives upstream"'
  else
    IC_BROKEN[$v]="the check (curl from ${IC_NS_OF[$v]} through it, identity arriving upstream) failed: ${out:0:200}"
    record_meta "interception_check_$v" "$(jq -cn --arg o "${IC_BROKEN[$v]}" '$o')"
  fi
}

# The veth guest under zerod: the same check as ic_check's.
ic_veth_check() {
  local out
  out=$(ip netns exec "$IC_PREFIX-vz" curl -s -m 10 -w ' code=%{http_code}' --cacert "$IC_GUEST_CA" \
    "https://$IC_NAME/echo" 2>&1) || true
  if [[ $out == *"authorization=Bearer zn-redacted"*"code=200" ]]; then
    record_meta interception_check_veth-zerod '"ok: 200, the identity arrives upstream"'
  else
    IC_BROKEN[veth-zerod]="curl from the veth guest through zerod to an identity rule failed: ${out:0:200}"
    record_meta interception_check_veth-zerod "$(jq -cn --arg o "${IC_BROKEN[veth-zerod]}" '$o')"
  fi
}

# ic_peer_checks: every peer variant, with the CA its guest trusts.
ic_peer_checks() {
  ic_peer_check nginx "$IC_DIR/pki/rpca.pem"
  ic_peer_check veth-nginx "$IC_DIR/pki/rpca.pem"
  ic_peer_check squid "$IC_DIR/squid/ca.pem"
  ic_peer_check veth-squid "$IC_DIR/squid/ca.pem"
  ic_peer_check mitmproxy "$IC_DIR/mitmproxy/ca.pem"
  ic_peer_check veth-mitmproxy "$IC_DIR/mitmproxy/ca.pem"
  ic_veth_check
  ic_idle_check
}

# ic_idle_check: every process of the lab (zerod, the peers, the nginx
# upstream and reverse proxies) idles before the figures: one busy while
# idle takes a core from whatever is measured (a mitmdump connected to
# itself once held one for whole runs). Recorded as a run fact; a busy one
# is named in the log.
ic_idle_check() {
  local pids=() pid before=() after=() i busy=""
  pids=("$ZEROD_PID" "${IC_PEER_PIDS[@]}" $(ic_nginx_pids "$IC_DIR/"))
  for pid in "${pids[@]}"; do before+=("$(proc_ticks "$pid")"); done
  sleep 1
  for i in "${!pids[@]}"; do after+=("$(proc_ticks "${pids[$i]}")"); done
  for i in "${!pids[@]}"; do
    # More than 10 ticks (10 % of a core at USER_HZ 100) in the second.
    (( ${after[$i]} - ${before[$i]} > 10 )) &&
      busy+="$(cat "/proc/${pids[$i]}/comm" 2> /dev/null) (pid ${pids[$i]}, $(( ${after[$i]} - ${before[$i]} )) ticks/s) "
  done
  if [ -n "$busy" ]; then
    log "interception: busy while idle: $busy"
    record_meta interception_idle "$(jq -n --arg b "busy: $busy" '$b')"
  else
    record_meta interception_idle '"ok: the lab idles before the figures"'
  fi
}

# ic_nginx_pids CONF_PREFIX: the masters started with a config under
# CONF_PREFIX, and their workers (whose command lines name no file).
ic_nginx_pids() {
  local master
  for master in $(pgrep -f "nginx -c $1" || true); do
    echo "$master" $(pgrep -P "$master" || true)
  done
}

# proc_ticks PID: CPU ticks the process (all its threads) has used; 0 if gone.
proc_ticks() {
  awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat" 2> /dev/null || echo 0
}

# The check: both paths answer 200 and the identity arrives upstream.
# Returns 0 when zerod intercepts; else prints why.
ic_check() {
  local out code body
  # The peer path first: it validates the nginx configs whatever zerod does.
  out=$(guest_exec "$IC_PREFIX" g1 curl -s -m 5 --cacert "$IC_DIR/pki/rpca.pem" \
    -H "Authorization: Bearer guest-supplied" "https://$IC_NAME/echo" 2>&1) || true
  if [[ $out == *"authorization=Bearer $IC_SECRET"* ]]; then
    record_meta interception_peer_check '"ok: nginx reverse proxy injects the identity"'
  else
    record_meta interception_peer_check "$(jq -cn --arg o "$out" '"failed: " + $o')"
  fi
  out=$(guest_exec "$IC_PREFIX" g0 curl -s -m 5 -o "$IC_DIR/check.body" -w '%{http_code}' \
    --cacert "$IC_GUEST_CA" "https://$IC_NAME/echo" 2>&1) || true
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
    echo "curl through zerod to an identity rule (https://$IC_NAME/echo) did not return 200 (curl: '${out:-no output}')${reason:+; zerod: $reason}"
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

# wrk_rps_ns NETNS URL SECONDS: requests/s or null (wrk_rps, by namespace).
wrk_rps_ns() {
  local out
  out=$(timeout $(($3 + 30)) ip netns exec "$1" wrk -t1 -c16 -d"$3"s "$2" 2> /dev/null) || true
  awk '/^Requests\/sec:/ {rps = $2} /Non-2xx or 3xx responses|Socket errors/ {bad = 1}
       END {if (rps == "" || bad) print "null"; else print rps}' <<< "$out"
}

# ic_wrk SECONDS: every variant that passed its check, alternated per round;
# zerod against each peer, from lab guests and from veth guests; then /echo,
# where each response carries the injected secret back (zerod scrubs it and
# records secret:reflected), against nginx, for what that path costs.
ic_wrk() {
  local secs=$1 body round f="$IC_DIR/wrk.txt" v kind peer target what
  for body in small 64k echo; do
    for ((round = 1; round <= ROUNDS; round++)); do
      for v in zerod nginx squid mitmproxy veth-zerod veth-nginx veth-squid veth-mitmproxy; do
        [ -z "${IC_BROKEN[$v]:-}" ] || continue
        # /echo (every response an alarm) is zerod's own path: nginx only.
        [ "$body" = echo ] && [[ $v == *squid || $v == *mitmproxy ]] && continue
        [ "$round" = 1 ] && [[ $v == *zerod ]] && ic_profile "$v-$body" "$secs"
        ic_accounted_run "$round" "$v" "$body" "$secs" "$f" \
          wrk_rps_ns "$IC_PREFIX-${IC_NS_OF[$v]}" "https://$IC_NAME/$body" "$secs"
        ic_profile_end
      done
    done
    for kind in "" veth-; do
      ic_cpu_figure "$body" "$kind" "proxy CPU per request, wrk keep-alive /$body${kind:+ (veth)}" us/req
    done
    if [ "$body" = echo ]; then
      for kind in "" veth-; do
        ic_wrk_figure "$f" echo "$kind" nginx "" "wrk keep-alive /echo through zerod (identity), the upstream echoing the credential: every response an alarm$([ -n "$kind" ] && echo " (veth)")" "wrk -t1 -c16 -d${secs}s"
      done
      continue
    fi
    for kind in "" veth-; do
      for peer in nginx squid mitmproxy; do
        case $peer in
          nginx) target=1.0 what="through zerod (identity)" ;;
          squid) target=2 what="through zerod vs squid ssl-bump (identity)" ;;
          mitmproxy) target="" what="through zerod vs mitmproxy (identity)" ;;
        esac
        ic_wrk_figure "$f" "$body" "$kind" "$peer" "$target" \
          "wrk keep-alive /$body $what$([ -n "$kind" ] && echo " (veth)")" "wrk -t1 -c16 -d${secs}s"
      done
    done
  done
}

# ic_cpu_ticks VARIANT: "group user sys" lines, CPU ticks so far of the
# process serving the variant, by thread group: zerod's proxy loops (loops),
# its audit writer (audit) and every other thread (other), by the names zerod
# gives them (common/thread_name.h); an nginx reverse proxy's master and
# workers (proxy). Nothing for squid and mitmproxy.
ic_cpu_ticks() {
  local v=$1 task
  case $v in
    zerod | veth-zerod)
      for task in /proc/"$ZEROD_PID"/task/*; do
        awk -v comm="$(cat "$task/comm" 2> /dev/null)" '{
          g = comm ~ /^zn-proxy-[0-9]+$/ ? "loops" : comm == "zn-audit" ? "audit" : "other"
          print g, $14, $15 }' "$task/stat" 2> /dev/null || true
      done ;;
    nginx | veth-nginx)
      for task in $(ic_nginx_pids "$IC_DIR/$([ "$v" = nginx ] && echo rp || echo rp-veth)/nginx.conf"); do
        awk '{print "proxy", $14, $15}' "/proc/$task/stat" 2> /dev/null || true
      done ;;
  esac | awk '{u[$1] += $2; s[$1] += $3} END {for (g in u) print g, u[g], s[g]}'
}

# ic_accounted_run ROUND VARIANT KEY SECONDS FILE CMD...: CMD (a run of
# SECONDS through the variant that prints its rate per second, or null),
# "ROUND VARIANT-KEY rate" appended to FILE and the run's CPU accounted.
ic_accounted_run() {
  local round=$1 v=$2 key=$3 secs=$4 f=$5 before rate
  shift 5
  before=$(ic_cpu_ticks "$v")
  rate=$("$@")
  ic_cpu_account "$v-$key" "$before" "$(ic_cpu_ticks "$v")" "$rate" "$secs"
  echo "$round $v-$key $rate" >> "$f"
}

# ic_cpu_account NAME BEFORE AFTER RPS SECONDS: appends "name group user_ticks
# sys_ticks requests" per group to $IC_DIR/cpu.txt (a failed run: nothing).
ic_cpu_account() {
  [ "$4" != null ] && [ -n "$2$3" ] || return 0
  awk -v name="$1" -v req="$(awk -v r="$4" -v t="$5" 'BEGIN {printf "%d", r * t}')" '
    NR == FNR {u[$1] = $2; s[$1] = $3; next}
    {print name, $1, $2 - u[$1], $3 - s[$1], req}' <(echo "$2") <(echo "$3") >> "$IC_DIR/cpu.txt"
}

# ic_cpu_figure KEY KIND NAME UNIT: CPU time per request (or connection),
# zerod (all its threads) against the nginx reverse proxy, over every round
# of the runs accounted as KIND{zerod,nginx}-KEY; the note splits zerod's
# into its loops, its audit writer and the rest, user and system.
# On this 2-core machine a client, the upstream and the proxy share the
# cores, so the proxy's CPU per request is what its throughput follows, and
# it varies much less between runs than requests/s.
ic_cpu_figure() {
  local body=$1 kind=$2 name=$3 unit=$4 f="$IC_DIR/cpu.txt" z n split
  [ -s "$f" ] || return 0
  # µs per request: ticks are 1/100 s (USER_HZ).
  z=$(awk -v n="${kind}zerod-$body" '$1 == n {t += $3 + $4; r[$2] += $5} END {
    if (r["loops"] > 0) printf "%.1f", t * 10000 / r["loops"]; else print "null"}' "$f")
  n=$(awk -v n="${kind}nginx-$body" '$1 == n {t += $3 + $4; r += $5} END {
    if (r > 0) printf "%.1f", t * 10000 / r; else print "null"}' "$f")
  split=$(awk -v n="${kind}zerod-$body" '$1 == n {u[$2] += $3; s[$2] += $4; r[$2] += $5} END {
    for (g in r) if (r[g] > 0) printf "%s %.1f+%.1f, ", g, u[g] * 10000 / r[g], s[g] * 10000 / r[g]}' "$f")
  [ "$z" != null ] && [ "$n" != null ] || return 0
  record_figure interception "$name" "$unit" "$z" "nginx TLS reverse proxy" "$n" \
    "$(awk -v a="$z" -v b="$n" 'BEGIN {printf "%.3f", a / b}')" "" "" \
    "zerod's threads, µs user+system per ${unit#us/}: ${split%, }; lower is better"
}

# ic_wrk_figure FILE BODY KIND PEER TARGET NAME NOTE: one figure, or why not.
ic_wrk_figure() {
  local f=$1 body=$2 kind=$3 peer=$4 target=$5 name=$6 note=$7 z p why
  z=$kind"zerod" p=$kind$peer
  why=${IC_BROKEN[$z]:-${IC_BROKEN[$p]:-}}
  if [ -n "$why" ]; then
    record_status interception "$name" skipped "$why"
    return 0
  fi
  if [ "$(variant_median "$f" "$p-$body")" = null ]; then
    # wrk counts errors as requests: a peer that answered errors (or
    # timed out) every round has no figure rather than a flattering one.
    record_status interception "$name" error "wrk through ${IC_PEER_NAME[$peer]} had errors or no answer in every round"
    return 0
  fi
  record_figure interception "$name" req/s "$(variant_median "$f" "$z-$body")" "${IC_PEER_NAME[$peer]}" \
    "$(variant_median "$f" "$p-$body")" "$(paired_ratio "$f" "$z-$body" "$p-$body")" \
    "$([ -n "$target" ] && echo ">=")" "$target" "$note"
}

# bulk_bps CA CMD...: bytes/s of the bulk download run under CMD (a guest's
# prefix), or null (not 200, or not every byte).
bulk_bps() {
  local ca=$1 out
  shift
  out=$("$@" curl -s -m 120 -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' \
    --cacert "$ca" "https://$IC_NAME/bulk" 2> /dev/null || true)
  awk -v want="$IC_BULK_BYTES" '$1 == 200 && $2 == want {print $3; next} {print "null"}' <<< "$out"
}

# mb_median FILE VARIANT: the variant's median bytes/s in MB/s, or null.
mb_median() {
  awk '{ if ($1 == "null") print "null"; else print $1 / 1e6 }' <<< "$(variant_median "$1" "$2")"
}

ic_bulk() {
  local round f="$IC_DIR/bulk.txt" bps aes label
  for ((round = 1; round <= ROUNDS; round++)); do
    # From the lab guest (through the frame pump, which caps it) and from the
    # veth guest (no pump): the second shows zerod's own rate.
    echo "$round zerod $(bulk_bps "$IC_GUEST_CA" guest_exec "$IC_PREFIX" "$IC_ZG")" >> "$f"
    bps="null"
    if [ -z "${IC_BROKEN[veth-zerod]:-}" ]; then
      [ "$round" = 1 ] && ic_profile veth-bulk 4
      bps=$(bulk_bps "$IC_GUEST_CA" ip netns exec "$IC_PREFIX-vz")
      ic_profile_end
    fi
    echo "$round veth-zerod $bps" >> "$f"
    # The same download from the ungoverned veth guest through the nginx
    # reverse proxy: what the guest, the upstream and the machine allow.
    echo "$round veth-nginx $(bulk_bps "$IC_DIR/pki/rpca.pem" ip netns exec "$IC_PREFIX-vd")" >> "$f"
    # openssl speed -bytes 16384: the last line is "AES-128-GCM <n>k" (1000s of bytes/s).
    aes=$(openssl speed -evp aes-128-gcm -bytes 16384 -seconds 2 2> /dev/null |
      awk '/^(AES-128-GCM|aes-128-gcm)/ {v = $NF} END {sub(/k$/, "", v); if (v == "") print "null"; else print v * 1000}')
    echo "$round aes $(num_or_null "$aes")" >> "$f"
  done
  for v in zerod veth-zerod; do
    label=""
    [ "$v" = veth-zerod ] && label=" (veth)"
    record_figure interception "bulk download through zerod ($((IC_BULK_BYTES / 1048576)) MiB)$label" MB/s \
      "$(mb_median "$f" "$v")" "openssl speed -evp aes-128-gcm (16 KiB, 1 core)" "$(mb_median "$f" aes)" "$(paired_ratio "$f" "$v" aes)"
  done
  record_figure interception "bulk download through zerod ($((IC_BULK_BYTES / 1048576)) MiB) vs nginx (veth)" MB/s \
    "$(mb_median "$f" veth-zerod)" "${IC_PEER_NAME[nginx]}" "$(mb_median "$f" veth-nginx)" "$(paired_ratio "$f" veth-zerod veth-nginx)"
}

# first_byte_ms PREFIX GUEST CURL-ARGS...: (time_starttransfer - time_namelookup) in ms.
first_byte_ms() {
  local prefix=$1 guest=$2
  shift 2
  first_byte_ms_ns "$prefix-$guest" "$@"
}
# first_byte_ms_ns NETNS CURL-ARGS...: the same, by namespace.
first_byte_ms_ns() {
  local ns=$1 out
  shift
  out=$(ip netns exec "$ns" curl -s -m 10 -o /dev/null -w '%{time_namelookup} %{time_starttransfer} %{http_code}' "$@" 2> /dev/null) || true
  awk '$3 == 200 {printf "%.3f\n", ($2 - $1) * 1000; next} {print "null"}' <<< "$out"
}

# ic_latency N KIND: KIND "" (lab guests g0 / g1) or "veth-" (vz / vd). The
# new-host names of the veth guests are the second IC_NEW_HOSTS names, never
# used by the lab guest (a leaf is minted for each).
ic_latency() {
  local n=$1 kind=$2 i f host zns dns off=0 label=""
  f="$IC_DIR/latency-$([ "$kind" = veth- ] && echo veth || echo lab).txt"
  zns="$IC_PREFIX-g0" dns="$IC_PREFIX-g1"
  if [ "$kind" = veth- ]; then
    zns="$IC_PREFIX-vz" dns="$IC_PREFIX-vd" off=$IC_NEW_HOSTS label=" (veth)"
    if [ -n "${IC_BROKEN[veth-zerod]:-}" ]; then
      record_status interception "connect+first-byte latency (warm, new-host)$label" skipped "${IC_BROKEN[veth-zerod]}"
      return 0
    fi
  fi
  for ((i = 0; i < n; i++)); do
    echo "warm zerod $(first_byte_ms_ns "$zns" --cacert "$IC_GUEST_CA" "https://$IC_NAME/small")" >> "$f"
    echo "warm direct $(first_byte_ms_ns "$dns" --cacert "$IC_DIR/pki/labca.pem" \
      --resolve "$IC_NAME:443:$IC_UPSTREAM" "https://$IC_NAME/small")" >> "$f"
    host="n$((off + i % IC_NEW_HOSTS)).bench.example"
    echo "new zerod $(first_byte_ms_ns "$zns" --cacert "$IC_GUEST_CA" "https://$host/small")" >> "$f"
    echo "new direct $(first_byte_ms_ns "$dns" --cacert "$IC_DIR/pki/labca.pem" \
      --resolve "$host:443:$IC_UPSTREAM" "https://$host/small")" >> "$f"
  done
  local p z d
  for kind in warm new; do
    for p in 50 99 99.9; do
      z=$(awk -v k="$kind" '$1 == k && $2 == "zerod" && $3 != "null" {print $3}' "$f" | percentile "$p")
      d=$(awk -v k="$kind" '$1 == k && $2 == "direct" && $3 != "null" {print $3}' "$f" | percentile "$p")
      record_figure interception "connect+first byte p$p ($kind$([ "$kind" = new ] && echo "-host"))$label" ms "$z" \
        "direct to upstream" "$d" "$(ratio "$z" "$d")" "" "" "$n requests each, alternated"
    done
  done
  # The targets are absolute: p99 added by the enforcer within 1 ms warm,
  # 2 ms for a new host (a leaf minted).
  local budget added what
  for kind in warm new; do
    budget=1 what="warm"
    [ "$kind" = new ] && budget=2 what="new-host"
    z=$(awk -v k="$kind" '$1 == k && $2 == "zerod" && $3 != "null" {print $3}' "$f" | percentile 99)
    d=$(awk -v k="$kind" '$1 == k && $2 == "direct" && $3 != "null" {print $3}' "$f" | percentile 99)
    added=$(awk -v z="$z" -v d="$d" 'BEGIN { if (z == "null" || d == "null") print "null"; else printf "%.3f\n", z - d }')
    record_figure interception "p99 added by zerod ($what)$label" ms "$added" "budget $budget ms" "$budget" \
      "$(ratio "$added" "$budget")" "<=" 1 "ratio = added ms / $budget ms budget"
  done
}

# ic_profile NAME SECONDS: with ZN_BENCH_PERF, perf records zerod (call
# graphs) for at most SECONDS while the figure runs; ic_profile_end waits.
IC_PERF_PID=""
ic_profile() {
  [ -n "${ZN_BENCH_PERF:-}" ] || return 0
  mkdir -p "$ZN_BENCH_PERF"
  perf record -q -F 499 --call-graph dwarf,16384 -p "$ZEROD_PID" -o "$ZN_BENCH_PERF/$1.data" -- sleep "$2" > /dev/null 2>&1 &
  IC_PERF_PID=$!
  sleep 1  # attaching to every thread takes a moment: a short figure (h2load, bulk) was missed
}
ic_profile_end() {
  [ -n "$IC_PERF_PID" ] || return 0
  wait "$IC_PERF_PID" || true
  IC_PERF_PID=""
}

# h2load_rps NETNS URL N: requests/s of N requests over 4 connections x 10
# streams, or null (any request failed or not 2xx).
h2load_rps() {
  local out
  out=$(timeout 120 ip netns exec "$1" h2load -n "$3" -c 4 -m 10 "$2" 2> /dev/null) || true
  awk '/^finished in/ {for (i = 1; i <= NF; i++) if ($(i + 1) == "req/s,") rps = $i}
       /^requests:/ {failed = $10; errored = $12} /^status codes:/ {ok = $3; sub(/,$/, "", ok)}
       END {if (rps == "" || failed != 0 || errored != 0 || ok != n) print "null"; else print rps}' n="$3" <<< "$out"
}

# ic_h2load N: zerod and the nginx reverse proxy over HTTP/2, alternated.
ic_h2load() {
  local n=$1 round f="$IC_DIR/h2load.txt" name="h2load (HTTP/2, 4 conns x 10 streams) through zerod (identity)"
  if [ -n "${IC_BROKEN[nginx]:-}" ]; then
    record_status interception "$name" skipped "${IC_BROKEN[nginx]}"
    return 0
  fi
  for ((round = 1; round <= ROUNDS; round++)); do
    [ "$round" = 1 ] && ic_profile h2load 10
    echo "$round zerod $(h2load_rps "$IC_PREFIX-g0" "https://$IC_NAME/small" "$n")" >> "$f"
    ic_profile_end
    echo "$round nginx $(h2load_rps "$IC_PREFIX-g1" "https://$IC_NAME/small" "$n")" >> "$f"
  done
  if [ "$(variant_median "$f" zerod)" = null ]; then
    record_status interception "$name" error "h2load through zerod had failed or non-2xx requests in every round"
    return 0
  fi
  record_figure interception "$name" req/s "$(variant_median "$f" zerod)" "nginx TLS reverse proxy (h2)" \
    "$(variant_median "$f" nginx)" "$(paired_ratio "$f" zerod nginx)" "" "" "h2load -n $n -c 4 -m 10"
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

# tls_rate_ns NETNS CA MODE SECONDS: connections/s (each one request) or
# null; "null" too when any failed, or when MODE resumes and fewer than 90 %
# resumed (a figure for full handshakes under the name of resumed ones).
tls_rate_ns() {
  local out
  out=$(timeout $(($4 + 60)) ip netns exec "$1" python3 "$REPO/bench/tls_connect_rate.py" \
    "$IC_NAME" 443 /small "$4" "$2" "$3" 2> /dev/null) || true
  awk -v mode="$3" 'NF == 4 {rate = $1; n = $2; resumed = $3; failed = $4}
    END {if (rate == "" || failed != 0 || n == 0 || (mode != "full" && resumed < 0.9 * n)) print "null"
         else print rate}' <<< "$out"
}

# ic_handshakes SECONDS: zerod and the nginx reverse proxy, full and resumed,
# from lab and veth guests, alternated per round.
ic_handshakes() {
  local secs=$1 round f="$IC_DIR/handshakes.txt" kind mode z p name
  for ((round = 1; round <= ROUNDS; round++)); do
    for kind in "" veth-; do
      for mode in full resumed resumed-tls1.2; do
        z=$kind"zerod" p=$kind"nginx"
        [ -n "${IC_BROKEN[$z]:-}" ] || ic_accounted_run "$round" "$z" "$mode" "$secs" "$f" \
          tls_rate_ns "$IC_PREFIX-${IC_NS_OF[$z]}" "$IC_GUEST_CA" "$mode" "$secs"
        [ -n "${IC_BROKEN[$p]:-}" ] || ic_accounted_run "$round" "$p" "$mode" "$secs" "$f" \
          tls_rate_ns "$IC_PREFIX-${IC_NS_OF[$p]}" "$IC_DIR/pki/rpca.pem" "$mode" "$secs"
      done
    done
  done
  for kind in "" veth-; do
    for mode in full resumed; do
      ic_cpu_figure "$mode" "$kind" "proxy CPU per new TLS connection, $mode handshakes${kind:+ (veth)}" us/conn
    done
    for mode in full resumed resumed-tls1.2; do
      z=$kind"zerod" p=$kind"nginx"
      name="new TLS connections/s from a guest, ${mode/-tls1.2/ TLS 1.2} handshakes, one request each${kind:+ (veth)}"
      if [ -n "${IC_BROKEN[$z]:-${IC_BROKEN[$p]:-}}" ]; then
        record_status interception "$name" skipped "${IC_BROKEN[$z]:-${IC_BROKEN[$p]:-}}"
      elif [ "$(variant_median "$f" "$z-$mode")" = null ] || [ "$(variant_median "$f" "$p-$mode")" = null ]; then
        record_status interception "$name" error "a connection failed (or did not resume) in every round"
      else
        record_figure interception "$name" conn/s "$(variant_median "$f" "$z-$mode")" "${IC_PEER_NAME[nginx]}" \
          "$(variant_median "$f" "$p-$mode")" "$(paired_ratio "$f" "$z-$mode" "$p-$mode")" ">=" 1.0 \
          "bench/tls_connect_rate.py ${secs}s"
      fi
    done
  done
}

# ic_hold: with ZN_BENCH_HOLD=FILE, the lab is kept as set up while FILE
# exists (to look at one figure by hand: strace, perf, a client of one's
# own); FILE.ready says, as bash declarations, where its parts are.
ic_hold() {
  local hold=${ZN_BENCH_HOLD:-}
  [ -n "$hold" ] || return 0
  declare -p IC_PREFIX IC_NAME IC_GUEST_CA IC_DIR ZEROD_PID IC_NS_OF > "$hold.ready"
  log "interception: held until $hold is removed (lab: $hold.ready)"
  while [ -e "$hold" ]; do sleep 1; done
}

# ic_part NAME: whether ZN_BENCH_IC_PARTS (a comma list of wrk, h2load,
# handshakes, bulk, latency, audit; unset: all) asks for this part: a trial
# of one change measures only what it touches.
ic_part() {
  [ -z "${ZN_BENCH_IC_PARTS:-}" ] && return 0
  [[ ",$ZN_BENCH_IC_PARTS," == *",$1,"* ]]
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
  ic_peer_checks
  ic_hold
  ic_part wrk && ic_wrk "$secs"
  ic_part h2load && ic_h2load "$([ "$QUICK" = 1 ] && echo 2000 || echo 20000)"
  ic_part handshakes && ic_handshakes "$secs"
  ic_part bulk && ic_bulk
  # The interception peers are done: stopped before the latency runs, so
  # nothing but the measured path can take a CPU from zerod's threads.
  local pid
  for pid in "${IC_PEER_PIDS[@]}"; do kill_wait "$pid"; done
  if ic_part latency; then
    ic_latency "$n" ""
    ic_latency "$n" veth-
  fi
  ic_part audit && ic_audit "$secs"
  cleanup_to "$mark"
}
