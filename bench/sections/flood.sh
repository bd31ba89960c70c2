# shellcheck shell=bash
# Section 6 — flood: packets per second one core drops and steers under a
# flood from a guest, zeroness's TC programs against the nftables rule set a
# user would write by hand for the same sessions (issue 11).
#
# Setup: a host namespace and a guest namespace joined by a veth pair. The
# guest floods 60-byte TCP SYNs (bench/flood_sender send: AF_PACKET +
# sendmmsg, the kernel has no pktgen) pinned to CPU 1 (taskset); the host
# side's receive processing is pinned to CPU 0 by RPS (rps_cpus = 1 on the
# veth's only RX queue: veth hands packets to the backlog of the CPU RPS
# picks). Replies towards the guest are dropped on the guest's own netdev
# ingress hook, the same in both variants.
#   drop:  tcp/22 to 198.18.0.10 (a destination no rule allows);
#   steer: tcp/443 SYNs to 198.18.0.10, assigned to the transparent proxy
#          listener on 127.0.0.1:15001 (the SYN-ACK work included).
# Variants, alternating per round:
#   zeroness: tap_ingress/tap_egress on the host side of the veth with N
#             sessions in zn_sessions (bench/flood_sender zeroness);
#   nftables: default drop in prerouting, the guest's (interface, address)
#             pair checked against a set of the N sessions', DNS and tcp
#             80/443 redirected with TPROXY, no conntrack.
# Both steer through the same policy rule (fwmark 0x200/0xf00 -> table 100,
# local default route) to the same listeners (bench/flood_sender listen).
# Figure: packets the verdict handled (zeroness's per-session counters, the
# nft rule's counter) per second of CPU 0's softirq time (/proc/stat), i.e.
# what one core drops or steers per second of its time. One sending core
# cannot saturate the receiving one (AF_PACKET tops out near 0.7 Mpps here,
# every packet is handled), so the wall-clock rate, in the figure's name, is
# the sender's and says little; the per-core figure carries the comparison.
# Target >= 1.0x nftables.

FLOOD_GUEST_MAC=02:7a:6e:fa:00:02
FLOOD_HOST_MAC=02:7a:6e:fa:00:01
FLOOD_GUEST_IP=198.19.250.2
FLOOD_HOST_IP=198.19.250.1
FLOOD_DST=198.18.0.10

# CPU 0's softirq time (USER_HZ ticks): the receive path runs there, in
# NET_RX softirq or ksoftirqd, and both are sampled into this column; other
# tasks sharing the core (user or system time) are not counted.
flood_cpu0_softirq() { awk '$1 == "cpu0" { print $8 }' /proc/stat; }

# flood_nft_rules SESSIONS: the hand-written rule set.
flood_nft_rules() {
  local n=$1 i elements="\"zfh\" . $FLOOD_GUEST_IP"
  for ((i = 2; i <= n; i++)); do
    elements+=", \"zg$i\" . 198.19.$(((i * 4) / 256 % 256)).$(((i * 4) % 256))"
  done
  cat << EOF
table inet znflood {
  counter steered {}
  counter dropped {}
  set guests4 {
    type ifname . ipv4_addr
    elements = { $elements }
  }
  chain prerouting {
    type filter hook prerouting priority mangle; policy drop;
    iif "lo" accept
    iifname . ip saddr != @guests4 drop
    meta l4proto { tcp, udp } th dport 53 tproxy ip to 127.0.0.1:15053 meta mark set 0x200 accept
    tcp dport { 80, 443 } tproxy ip to 127.0.0.1:15001 meta mark set 0x200 counter name "steered" accept
    counter name "dropped" drop
  }
}
EOF
}

flood_nft_count() {  # NS KIND(steer|drop)
  local name=dropped
  [ "$2" = steer ] && name=steered
  ip netns exec "$1" nft list counter inet znflood "$name" | sed -n 's/.*packets \([0-9]*\).*/\1/p'
}

# flood_measure NS KIND VARIANT: runs the flood; prints "<handled> <softirq ticks> <seconds> <sent>"
# (handled < sent: the receiving core could not keep up, which is the point).
flood_measure() {
  local ns=$1 kind=$2 variant=$3 dport=22 c0 c1 b0 b1 sent
  [ "$kind" = steer ] && dport=443
  if [ "$variant" = zeroness ]; then c0=$(flood_zn_count "$kind"); else c0=$(flood_nft_count "$ns" "$kind"); fi
  b0=$(flood_cpu0_softirq)
  sent=$(ip netns exec "$FLOOD_GUEST_NS" taskset -c 1 "$BUILD_DIR/bench/flood_sender" send --iface zfg \
    --src-mac "$FLOOD_GUEST_MAC" --dst-mac "$FLOOD_HOST_MAC" --src-ip "$FLOOD_GUEST_IP" --dst-ip "$FLOOD_DST" \
    --dport "$dport" --seconds "$FLOOD_SECONDS")
  b1=$(flood_cpu0_softirq)
  # Let the backlog drain into the counters.
  sleep 0.2
  if [ "$variant" = zeroness ]; then c1=$(flood_zn_count "$kind"); else c1=$(flood_nft_count "$ns" "$kind"); fi
  echo "$((c1 - c0)) $((b1 - b0)) $(awk '{print $3, $2}' <<< "$sent")"
}

# The zeroness datapath of a round: a coprocess answering "counters".
flood_zn_start() {
  coproc FLOOD_ZN { ip netns exec "$FLOOD_HOST_NS" "$BUILD_DIR/bench/flood_sender" zeroness --iface zfh \
    --guest-mac "$FLOOD_GUEST_MAC" --guest-ip "$FLOOD_GUEST_IP" --gateway-ip "$FLOOD_HOST_IP" \
    --sessions "$FLOOD_SESSIONS" 2>> "$WORK/flood_zeroness.err"; }
  on_exit "kill_wait $FLOOD_ZN_PID"
  local line
  read -r -t 30 line <&"${FLOOD_ZN[0]}" || true
  [ "$line" = ATTACHED ] || die "flood: the datapath did not attach: $(cat "$WORK/flood_zeroness.err")"
}
flood_zn_count() {
  local line
  echo counters >&"${FLOOD_ZN[1]}"
  read -r -t 10 line <&"${FLOOD_ZN[0]}"
  if [ "$1" = steer ]; then sed -n 's/.*steer=\([0-9]*\).*/\1/p' <<< "$line"; else sed -n 's/.*drop=\([0-9]*\).*/\1/p' <<< "$line"; fi
}
flood_zn_stop() {
  local pid=$FLOOD_ZN_PID
  eval "exec ${FLOOD_ZN[1]}>&-"
  wait "$pid" 2> /dev/null || true
}

# Medians over the rounds of $WORK/flood.txt ("variant kind handled softirq
# seconds sent"): handled packets per softirq second of CPU 0, and per second.
flood_per_core() {  # VARIANT KIND HZ
  awk -v v="$1" -v k="$2" -v hz="$3" '$1 == v && $2 == k && $4 > 0 { print $3 * hz / $4 }' "$WORK/flood.txt" | median
}
flood_raw() {  # VARIANT KIND
  awk -v v="$1" -v k="$2" '$1 == v && $2 == k && $5 > 0 { print $3 / $5 }' "$WORK/flood.txt" | median
}

section_flood() {
  local mark prefix r kind variant out hz pps zn nft
  FLOOD_SESSIONS=1000
  FLOOD_SECONDS=5
  [ "$QUICK" = 1 ] && FLOOD_SECONDS=2
  command -v nft > /dev/null || die "flood: nft missing (scripts/install-deps.sh --bench)"
  hz=$(getconf CLK_TCK)
  mark=$(cleanup_mark)
  prefix=$(lab_prefix f)
  FLOOD_HOST_NS="$prefix-h"
  FLOOD_GUEST_NS="$prefix-g"
  echo "$FLOOD_HOST_NS" >> "$WORK/netns"
  echo "$FLOOD_GUEST_NS" >> "$WORK/netns"
  netns_up "$FLOOD_HOST_NS"
  netns_up "$FLOOD_GUEST_NS"
  ip -n "$FLOOD_HOST_NS" link add zfh address "$FLOOD_HOST_MAC" type veth peer name zfg netns "$FLOOD_GUEST_NS" \
    address "$FLOOD_GUEST_MAC"
  ip -n "$FLOOD_HOST_NS" addr add "$FLOOD_HOST_IP/30" dev zfh
  ip -n "$FLOOD_GUEST_NS" addr add "$FLOOD_GUEST_IP/30" dev zfg
  ip -n "$FLOOD_HOST_NS" link set zfh up
  ip -n "$FLOOD_GUEST_NS" link set zfg up
  # Steered packets are delivered locally, to the socket assigned to them.
  ip -n "$FLOOD_HOST_NS" rule add fwmark 0x200/0xf00 lookup 100
  ip -n "$FLOOD_HOST_NS" route add local 0.0.0.0/0 dev lo table 100
  # The host's receive path on CPU 0, the sender on CPU 1.
  ip netns exec "$FLOOD_HOST_NS" sh -c 'echo 1 > /sys/class/net/zfh/queues/rx-0/rps_cpus'
  # The guest ignores what comes back (SYN-ACKs), in both variants alike.
  # (nft's netdev ingress hook: this kernel has no matchall/gact for tc.)
  echo 'table netdev znflood_guest { chain in { type filter hook ingress device "zfg" priority 0; policy drop; }; }' |
    ip netns exec "$FLOOD_GUEST_NS" nft -f -
  bg_in_netns "$FLOOD_HOST_NS" "$WORK/flood_listen.log" "$BUILD_DIR/bench/flood_sender" listen > /dev/null
  wait_tcp "$FLOOD_HOST_NS" 127.0.0.1 15001
  flood_nft_rules "$FLOOD_SESSIONS" > "$WORK/flood.nft"
  record_meta flood_sessions "$FLOOD_SESSIONS"
  record_meta flood_seconds "$FLOOD_SECONDS"

  : > "$WORK/flood.txt"
  for ((r = 0; r < ROUNDS; r++)); do
    for variant in zeroness nftables; do
      if [ "$variant" = zeroness ]; then
        flood_zn_start
      else
        ip netns exec "$FLOOD_HOST_NS" nft -f "$WORK/flood.nft"
      fi
      for kind in drop steer; do
        out=$(flood_measure "$FLOOD_HOST_NS" "$kind" "$variant")
        echo "$variant $kind $out" >> "$WORK/flood.txt"
        log "flood round $r $variant $kind: handled, CPU 0 softirq ticks, seconds, sent = $out"
      done
      if [ "$variant" = zeroness ]; then
        flood_zn_stop
      else
        ip netns exec "$FLOOD_HOST_NS" nft delete table inet znflood
      fi
    done
  done

  for kind in drop steer; do
    zn=$(flood_per_core zeroness "$kind" "$hz")
    nft=$(flood_per_core nftables "$kind" "$hz")
    pps="zeroness $(printf '%.0f' "$(flood_raw zeroness "$kind")") pkt/s, nftables"
    pps+=" $(printf '%.0f' "$(flood_raw nftables "$kind")") pkt/s wall-clock"
    case $kind in
      drop) record_figure flood "tcp/22 dropped per softirq-second of one core ($FLOOD_SESSIONS sessions; $pps)" pkt/s \
        "$zn" nftables "$nft" "$(ratio "$zn" "$nft")" ">=" 1.0 ;;
      steer) record_figure flood "tcp/443 SYNs steered per softirq-second of one core ($FLOOD_SESSIONS sessions; $pps)" pkt/s \
        "$zn" nftables "$nft" "$(ratio "$zn" "$nft")" ">=" 1.0 ;;
    esac
  done
  sed 's/^/  /' "$WORK/flood.txt" >&2
  cleanup_to "$mark"
}
