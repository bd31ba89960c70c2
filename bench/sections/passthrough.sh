# shellcheck shell=bash
# Section 2 — passthrough throughput: iperf3 from a lab guest to an iperf3
# server in the lab's stand-in internet (198.18.0.13:5201), four ways:
#   zerod    guest g0 under zerod, an L4 rule for 198.18.0.13:5201: the
#            datapath steers the flow to zerod's proxy, which splices it on
#   direct   guest g1, no enforcement: routed by the host namespace
#   haproxy  g1 -> haproxy (mode tcp) on its gateway 198.19.1.1:15201 -> server
#   socat    g1 -> socat on 198.19.1.1:15202 -> server
# One lab, both guests behind the same kind of frame pump, variants alternated
# per round; Gbit/s medians and per-round ratios (median).
# The lab's frame pump (userspace, one frame per read/write) caps a lab guest
# near 1 Gbit/s, so the same four are measured again from two veth guests
# (namespaces wired to the host namespace by a veth pair, no pump): "vz"
# adopted by zerod (session benchv, TC attached to its veth), "vd" ungoverned.
# A third veth guest, "vk", is adopted by a second zerod in the same host
# namespace (its own pins, state and listener ports) that relays in the kernel
# ("proxy_kernel_splice": sockhash + sk_skb verdict, bpf/splice.bpf.c) instead
# of splice(2): "veth-kernel", reported against the same peers, no target
# (splice(2) is the default since the A/B of 2026-11-30).
# Targets (issue 11): zerod >= 0.9x direct, >= 2x haproxy.

PT_SERVER=198.18.0.13
PT_PORT=5201

# pt_iperf NETNS ADDR PORT SECONDS: receiver Gbit/s, or "null".
pt_iperf() {
  local netns=$1 addr=$2 port=$3 secs=$4 out
  out=$(timeout $((secs + 30)) ip netns exec "$netns" \
    iperf3 -c "$addr" -p "$port" -t "$secs" -O 1 -J 2> /dev/null) || true
  jq -r '(.end.sum_received.bits_per_second // empty) / 1e9' <<< "$out" 2> /dev/null | grep . || echo null
}

# pt_veth_guest PREFIX NAME HOSTDEV GUEST_CIDR GATEWAY MAC: namespace
# PREFIX-NAME whose eth0 is a veth peer of HOSTDEV in PREFIX-host; IPv4 only.
pt_veth_guest() {
  local prefix=$1 ns="$1-$2" dev=$3 cidr=$4 gw=$5 mac=$6
  echo "$ns" >> "$WORK/netns"
  on_exit "ip netns del $ns"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$prefix-host" link add "$dev" type veth peer name eth0 netns "$ns"
  ip -n "$ns" link set eth0 address "$mac"
  ip -n "$ns" addr add "$cidr" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "$gw"
  ip -n "$prefix-host" addr add "$gw/24" dev "$dev"
  ip -n "$prefix-host" link set "$dev" up
}

section_passthrough() {
  local mark prefix dir secs=10 round v gbps
  mark=$(cleanup_mark)
  [ "$QUICK" = 1 ] && secs=3
  prefix=$(lab_prefix p)
  dir="$WORK/passthrough"
  mkdir -p "$dir"
  lab_up "$prefix" 2 --ungoverned
  bg_in_netns "$prefix-inet" "$dir/iperf3.log" iperf3 -s -B "$PT_SERVER" -p "$PT_PORT" > /dev/null
  wait_tcp "$prefix-inet" "$PT_SERVER" "$PT_PORT"

  # zerod governs g0's TAP (zn-tap0) with one L4 rule; g1 stays ungoverned.
  zerod_start "$prefix-host" "$dir/zerod" "/sys/fs/bpf/zeroness-$prefix" '{"metrics_port": 0}'
  printf '{"policy":{"allow":[{"host":"%s","port":%s,"proto":"tcp"}]}}\n' "$PT_SERVER" "$PT_PORT" > "$dir/l4.json"
  znctl_in "$dir/zerod" session create bench --policy "$dir/l4.json" --device zn-tap0 --slot 0 > /dev/null

  # The veth guests: vz adopted by zerod (addresses from its session), vd not.
  local net
  pt_veth_guest "$prefix" vz vz0 198.19.10.2/24 198.19.10.1 02:00:00:00:00:00
  znctl_in "$dir/zerod" session create benchv --policy "$dir/l4.json" --device vz0 --slot 10 > /dev/null
  net=$(znctl_in "$dir/zerod" -j session show benchv)
  ip -n "$prefix-vz" link set eth0 address "$(jq -r .network.mac <<< "$net")"
  if [ "$(jq -r .network.address <<< "$net")" != 198.19.10.2/24 ] || [ "$(jq -r .network.gateway <<< "$net")" != 198.19.10.1 ]; then
    die "zerod gave slot 10 $(jq -c .network <<< "$net"), not 198.19.10.2/24 via .1"
  fi
  pt_veth_guest "$prefix" vd vd0 198.19.11.2/24 198.19.11.1 02:00:00:00:11:02
  zerod_start "$prefix-host" "$dir/zerodk" "/sys/fs/bpf/zeroness-$prefix-k" \
    '{"metrics_port": 0, "proxy_port": 15011, "dns_port": 15063, "proxy_kernel_splice": true}'
  pt_veth_guest "$prefix" vk vk0 198.19.12.2/24 198.19.12.1 02:00:00:00:00:00
  znctl_in "$dir/zerodk" session create benchk --policy "$dir/l4.json" --device vk0 --slot 12 > /dev/null
  net=$(znctl_in "$dir/zerodk" -j session show benchk)
  ip -n "$prefix-vk" link set eth0 address "$(jq -r .network.mac <<< "$net")"
  if [ "$(jq -r .network.address <<< "$net")" != 198.19.12.2/24 ]; then
    die "the kernel-relay zerod gave slot 12 $(jq -c .network <<< "$net"), not 198.19.12.2/24"
  fi

  # The peers, listening on g1's gateway address in the host namespace.
  cat > "$dir/haproxy.cfg" <<- CFG
	global
	    maxconn 256
	defaults
	    mode tcp
	    timeout connect 5s
	    timeout client 120s
	    timeout server 120s
	frontend bench
	    bind 198.19.1.1:15201
	    default_backend iperf
	backend iperf
	    server upstream $PT_SERVER:$PT_PORT
	CFG
  bg_in_netns "$prefix-host" "$dir/haproxy.log" haproxy -db -f "$dir/haproxy.cfg" > /dev/null
  bg_in_netns "$prefix-host" "$dir/socat.log" \
    socat TCP-LISTEN:15202,bind=198.19.1.1,reuseaddr,fork "TCP:$PT_SERVER:$PT_PORT" > /dev/null
  cp "$dir/haproxy.cfg" "$dir/haproxy-veth.cfg"
  sed -i 's/198.19.1.1:15201/198.19.11.1:15201/' "$dir/haproxy-veth.cfg"
  bg_in_netns "$prefix-host" "$dir/haproxy-veth.log" haproxy -db -f "$dir/haproxy-veth.cfg" > /dev/null
  bg_in_netns "$prefix-host" "$dir/socat-veth.log" \
    socat TCP-LISTEN:15202,bind=198.19.11.1,reuseaddr,fork "TCP:$PT_SERVER:$PT_PORT" > /dev/null
  local a p
  for a in 198.19.1.1 198.19.11.1; do
    for p in 15201 15202; do wait_tcp "$prefix-host" "$a" "$p"; done
  done

  record_meta passthrough_seconds "$secs"
  for ((round = 1; round <= ROUNDS; round++)); do
    for v in zerod direct haproxy socat veth-zerod veth-direct veth-haproxy veth-socat veth-kernel; do
      case $v in
        zerod) gbps=$(pt_iperf "$prefix-g0" "$PT_SERVER" "$PT_PORT" "$secs") ;;
        direct) gbps=$(pt_iperf "$prefix-g1" "$PT_SERVER" "$PT_PORT" "$secs") ;;
        haproxy) gbps=$(pt_iperf "$prefix-g1" 198.19.1.1 15201 "$secs") ;;
        socat) gbps=$(pt_iperf "$prefix-g1" 198.19.1.1 15202 "$secs") ;;
        veth-zerod) gbps=$(pt_iperf "$prefix-vz" "$PT_SERVER" "$PT_PORT" "$secs") ;;
        veth-direct) gbps=$(pt_iperf "$prefix-vd" "$PT_SERVER" "$PT_PORT" "$secs") ;;
        veth-haproxy) gbps=$(pt_iperf "$prefix-vd" 198.19.11.1 15201 "$secs") ;;
        veth-socat) gbps=$(pt_iperf "$prefix-vd" 198.19.11.1 15202 "$secs") ;;
        veth-kernel) gbps=$(pt_iperf "$prefix-vk" "$PT_SERVER" "$PT_PORT" "$secs") ;;
      esac
      echo "$round $v $gbps" >> "$dir/rounds.txt"
      log "passthrough round $round: $v $gbps Gbit/s"
    done
  done
  cp "$dir/rounds.txt" "$RESULTS_DIR/$STAMP-passthrough-rounds.txt"

  # Per-variant medians, and per-round ratios of zerod to each peer.
  local kind
  for kind in "" veth-; do
    pt_report "$dir/rounds.txt" "$kind" "$secs" "$dir/zerod"
  done
  pt_report "$dir/rounds.txt" veth- "$secs" "$dir/zerodk" kernel
  cleanup_to "$mark"
}

# pt_report ROUNDS_FILE KIND SECONDS ZEROD_DIR [VARIANT]: KIND "" (lab guests) or
# "veth-"; VARIANT the zerod measured, "zerod" (splice(2), the default) or
# "kernel" (the kernel relay: reported without targets).
pt_report() {
  local f=$1 kind=$2 secs=$3 zdir=$4 variant=${5:-zerod} med_zerod med_peer peer target op r what note
  local label="zerod splice"
  [ "$variant" = kernel ] && label="zerod kernel relay"
  what="lab guest"
  note="iperf3 -t $secs; TAP + userspace frame pump"
  if [ "$kind" = veth- ]; then
    what="veth guest"
    note="iperf3 -t $secs; veth, no pump"
  fi
  med_zerod=$(awk -v v="$kind$variant" '$2 == v && $3 != "null" {print $3}' "$f" | median)
  if [ "$med_zerod" = null ]; then
    record_status passthrough "$label, $what" error \
      "iperf3 through zerod failed every round (zerod log: $(tail -3 "$zdir/zerod.log" | tr '\n' ' '))"
  fi
  for peer in direct haproxy socat; do
    med_peer=$(awk -v p="$kind$peer" '$2 == p && $3 != "null" {print $3}' "$f" | median)
    r=$(awk -v z="$kind$variant" -v p="$kind$peer" '{g[$1 " " $2] = $3} END {
          for (k in g) { split(k, a, " "); if (a[2] == z && g[a[1] " " p] != "null" && g[k] != "null" && g[a[1] " " p] > 0)
            print g[k] / g[a[1] " " p] } }' "$f" | median)
    case $peer in
      direct) op=">=" target=0.9 ;;
      haproxy) op=">=" target=2 ;;
      *) op="" target="" ;;
    esac
    [ "$variant" = kernel ] && op="" target=""
    record_figure passthrough "$label vs $peer ($what)" Gbit/s "$med_zerod" "$peer" "$med_peer" "$r" \
      "$op" "$target" "$note"
  done
}
