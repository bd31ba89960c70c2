# shellcheck shell=bash
# Shared helpers of scripts/bench.sh and bench/sections/*.sh: cleanup stack,
# lab and zerod setup/teardown, medians, and recording figures as JSON lines
# (jq) that become bench/results/<date>.{json,md} and the PNG charts.
#
# Expects from the caller: REPO (repository root), BUILD_DIR, WORK (a private
# temporary directory), ROUNDS, QUICK (0/1), RESULTS_DIR, STAMP.

# ---- cleanup: a stack run in reverse order (sections mark and unwind theirs;
# the EXIT trap of bench.sh unwinds whatever is left) ----
CLEANUP=()
on_exit() { CLEANUP+=("$*"); }
cleanup_mark() { echo "${#CLEANUP[@]}"; }
cleanup_to() {
  local mark=${1:-0} i
  for ((i = ${#CLEANUP[@]} - 1; i >= mark; i--)); do
    eval "${CLEANUP[i]}" > /dev/null 2>&1 || true
    unset 'CLEANUP[i]'
  done
  CLEANUP=("${CLEANUP[@]}")
}

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# ---- binaries ----
zn_lab() { "$BUILD_DIR/tools/zn-lab/zn-lab" "$@"; }
zerod_bin() { echo "$BUILD_DIR/tools/zerod/zerod"; }

# A lab prefix unique to this run (1-16 of [A-Za-z0-9_]): zb<pid><tag>.
# Every prefix handed out is written down so the EXIT trap can sweep it.
lab_prefix() {
  local p="zb$$$1"
  echo "$p" >> "$WORK/labs"
  echo "${p:0:16}"
}

# lab_up PREFIX GUESTS [--ungoverned]: a lab that is torn down on cleanup.
lab_up() {
  local prefix=$1 guests=$2
  shift 2
  on_exit "lab_down $prefix"
  zn_lab --prefix "$prefix" up --guests "$guests" "$@" > /dev/null
}
lab_down() {
  local prefix=$1
  zn_lab --prefix "$prefix" down > /dev/null 2>&1 || true
  rm -rf "/sys/fs/bpf/zeroness-$prefix" "/etc/netns/$prefix-"* 2> /dev/null || true
}
# Sweep every lab this run created (the EXIT trap's safety net).
sweep_labs() {
  local p
  [ -f "$WORK/labs" ] || return 0
  sort -u "$WORK/labs" | while read -r p; do
    [ -n "$p" ] && lab_down "${p:0:16}"
  done
}

# A bare network namespace (control-plane section): removed on cleanup.
netns_up() {
  local ns=$1
  on_exit "ip netns del $ns"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
}

# scratch_netns TAG: a bare namespace of this run (lo up), removed on cleanup,
# for benchmark programs that open sockets (the verdict fixtures' listeners).
# Sets SCRATCH_NS.
SCRATCH_NS=""
scratch_netns() {
  SCRATCH_NS="$(lab_prefix "$1")-x"
  echo "$SCRATCH_NS" >> "$WORK/netns"
  netns_up "$SCRATCH_NS"
}

guest_exec() {  # PREFIX GUEST CMD...
  local prefix=$1 guest=$2
  shift 2
  zn_lab --prefix "$prefix" exec "$guest" -- "$@"
}

# bg_in_netns NS LOG CMD...: a background process in a namespace, killed on
# cleanup. Prints its pid (ip netns exec execs, so the pid is the command's).
bg_in_netns() {
  local ns=$1 logf=$2 pid
  shift 2
  ip netns exec "$ns" "$@" > "$logf" 2>&1 < /dev/null &
  pid=$!
  on_exit "kill_wait $pid"
  echo "$pid"
}
kill_wait() {
  kill "$1" 2> /dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2> /dev/null || return 0; sleep 0.1; done
  kill -9 "$1" 2> /dev/null || true
}

# wait_tcp NS ADDR PORT: until something accepts there (10 s).
wait_tcp() {
  local ns=$1 addr=$2 port=$3
  for _ in $(seq 100); do
    ip netns exec "$ns" nc -z -w 1 "$addr" "$port" 2> /dev/null && return 0
    sleep 0.1
  done
  log "nothing accepts on $addr:$port in $ns"
  return 1
}

# wait_listen NETNS PORT: until a TCP socket listens on PORT in NETNS, read
# from the socket table, never by connecting. For a transparent proxy: a
# probe connection to its own listener has itself as its original
# destination, and mitmdump, given one, connects to itself over and over
# (measured: a core busy for the rest of the run, under every figure).
wait_listen() {
  local ns=$1 port=$2
  for _ in $(seq 100); do
    [ -n "$(ip netns exec "$ns" ss -Htln "sport = :$port")" ] && return 0
    sleep 0.1
  done
  log "nothing listens on port $port in $ns"
  return 1
}

# zerod_start NETNS DIR PIN_ROOT [EXTRA_JSON]: zerod with its own state dir,
# control socket $DIR/zerod.sock and config $DIR/zerod.json (EXTRA_JSON is
# merged into the config). Stopped (SIGTERM) on cleanup. Sets ZEROD_PID.
# The lab's stand-in internet (198.18.0.0/16, 2001:db8:18::/48) is a
# benchmarking range zerod refuses unless its config allows it; the guest
# pool 198.19.0.0/16 next to it stays refused.
ZEROD_PID=""
zerod_start() {
  local netns=$1 dir=$2 pins=$3 extra=${4:-'{}'}
  mkdir -p "$dir"
  jq -n --arg ns "$netns" --arg pins "$pins" --arg state "$dir/state" --arg sock "$dir/zerod.sock" \
    --arg key "$dir/host.key" --argjson extra "$extra" \
    '{netns: $ns, pin_root: $pins, state_dir: $state, host_key: $key, control_socket: $sock,
      upstream_allow: ["198.18.0.0/16", "2001:db8:18::/48"]} + $extra' > "$dir/zerod.json"
  "$(zerod_bin)" --config "$dir/zerod.json" > "$dir/zerod.log" 2>&1 < /dev/null &
  ZEROD_PID=$!
  on_exit "kill_wait $ZEROD_PID"
  for _ in $(seq 100); do
    if [ -S "$dir/zerod.sock" ] && znctl_in "$dir" status > /dev/null 2>&1; then return 0; fi
    kill -0 "$ZEROD_PID" 2> /dev/null || break
    sleep 0.1
  done
  log "zerod did not come up; its log:"
  tail -20 "$dir/zerod.log" >&2
  return 1
}
znctl_in() {  # DIR ARGS...: znctl against the zerod of DIR
  local dir=$1
  shift
  "$BUILD_DIR/tools/znctl/znctl" --socket "$dir/zerod.sock" --state-dir "$dir/state" \
    --pin-root "$(jq -r .pin_root "$dir/zerod.json")" "$@"
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# ---- numbers ----
# median of the numbers on stdin (one a line); "null" if none.
median() {
  sort -g | awk '{a[NR] = $1} END {
    if (NR == 0) print "null";
    else if (NR % 2) print a[(NR + 1) / 2];
    else printf "%.6g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# percentile P (0-100) of the numbers on stdin, nearest rank.
percentile() {
  sort -g | awk -v p="$1" '{a[NR] = $1} END {
    if (NR == 0) { print "null"; exit }
    r = int(p / 100 * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR; print a[r] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0 || a == "null" || b == "null") print "null"; else printf "%.4f\n", a / b }'; }
num_or_null() { [[ $1 =~ ^-?[0-9.]+([eE][-+]?[0-9]+)?$ ]] && echo "$1" || echo null; }

# ---- recording ----
# record_figure SECTION NAME UNIT VALUE BASELINE_NAME BASELINE_VALUE RATIO [TARGET_OP TARGET [NOTE]]
#   TARGET_OP: "<=" or ">=" (RATIO compared with TARGET), "" for none.
record_figure() {
  local section=$1 name=$2 unit=$3 value baseline_name=$5 baseline ratio_v op=${8:-} target note=${10:-}
  value=$(num_or_null "$4")
  baseline=$(num_or_null "$6")
  ratio_v=$(num_or_null "$7")
  target=$(num_or_null "${9:-}")
  jq -cn --arg section "$section" --arg name "$name" --arg unit "$unit" --argjson value "$value" \
    --arg baseline_name "$baseline_name" --argjson baseline "$baseline" --argjson ratio "$ratio_v" \
    --arg op "$op" --argjson target "$target" --arg note "$note" \
    '{section: $section, name: $name, unit: $unit, value: $value, baseline_name: $baseline_name,
      baseline: $baseline, ratio: $ratio, status: "ok",
      target: (if $op == "" or $target == null then null else ($op + " " + ($target | tostring) + "x") end),
      met: (if $op == "" or $target == null or $ratio == null then null
            elif $op == "<=" then $ratio <= $target else $ratio >= $target end),
      note: (if $note == "" then null else $note end)}' >> "$WORK/figures.jsonl"
}
# record_status SECTION NAME STATUS WHY: a figure that was not measured
# (status "skipped" or "error").
record_status() {
  jq -cn --arg section "$1" --arg name "$2" --arg status "$3" --arg why "$4" \
    '{section: $section, name: $name, status: $status, why: $why}' >> "$WORK/figures.jsonl"
}
# record_meta KEY JSON_VALUE: extra facts about the run (per section setup).
record_meta() {
  jq -cn --arg k "$1" --argjson v "$2" '{meta: {($k): $v}}' >> "$WORK/meta.jsonl"
}

# ---- output ----
write_results() {
  local json="$RESULTS_DIR/$STAMP.json" md="$RESULTS_DIR/$STAMP.md"
  touch "$WORK/figures.jsonl" "$WORK/meta.jsonl"
  jq -n --arg stamp "$STAMP" --argjson rounds "$ROUNDS" --argjson quick "$QUICK" \
    --arg kernel "$(uname -r)" --arg cpu "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)" \
    --argjson cpus "$(nproc)" --arg commit "$(git -C "$REPO" rev-parse --short HEAD 2> /dev/null || echo unknown)" \
    --arg dirty "$(git -C "$REPO" status --porcelain 2> /dev/null | head -1)" \
    --arg build_type "$(awk -F= '/^CMAKE_BUILD_TYPE:/ {print $2}' "$BUILD_DIR/CMakeCache.txt" 2> /dev/null)" \
    --slurpfile figures "$WORK/figures.jsonl" --slurpfile meta "$WORK/meta.jsonl" \
    '{run: ({date: $stamp, rounds: $rounds, quick: ($quick == 1), kernel: $kernel, cpu: $cpu, cpus: $cpus,
             commit: $commit, worktree_dirty: ($dirty != ""), build_type: $build_type}
            + ([$meta[].meta] | add // {})),
      figures: $figures}' > "$json"
  jq -r -f "$REPO/bench/results_md.jq" "$json" > "$md"
  plot_charts "$json"
  log "results: $json, $md"
}

# One PNG per section: the ratio of every figure to its baseline (log scale),
# with the 1.0 line and each figure's target.
plot_charts() {
  local json=$1 section dat png
  command -v gnuplot > /dev/null || {
    log "gnuplot not installed: no charts"
    return 0
  }
  for section in $(jq -r '[.figures[] | select(.status == "ok" and .ratio != null) | .section] | unique | .[]' "$json"); do
    dat="$WORK/chart-$section.dat"
    png="$RESULTS_DIR/$STAMP-$section.png"
    jq -r --arg s "$section" '.figures[] | select(.section == $s and .status == "ok" and .ratio != null)
      | [(.name | gsub(" "; "_") | if length > 40 then .[0:39] + "~" else . end), .ratio,
         (if .target == null then "NaN" else (.target | capture("(?<t>[0-9.]+)").t) end)] | @tsv' "$json" > "$dat"
    [ -s "$dat" ] || continue
    local n
    n=$(wc -l < "$dat")
    gnuplot <<- GP 2> "$WORK/gnuplot-$section.log" || log "gnuplot failed for $section (see $WORK/gnuplot-$section.log)"
	set terminal pngcairo size $((500 + n * 28)),560 noenhanced font ",9"
	set output "$png"
	set title "zeroness bench $STAMP: $section (ratio to baseline, median)"
	set style data histograms
	set style fill solid 0.7 border -1
	set boxwidth 0.8
	set logscale y
	set grid ytics
	set xtics rotate by -50 scale 0
	set bmargin 16
	set rmargin 14
	set xrange [-0.7:$n - 0.3]
	set ylabel "ratio (figure / baseline)"
	set key top left
	plot "$dat" using 2:xtic(1) title "ratio" lc rgb "#3465a4", \
	     "" using 0:3 with points pt 7 ps 1.2 lc rgb "#cc0000" title "target", \
	     1 with lines lc rgb "#555555" dt 2 title "1.0"
	GP
  done
}
