# shellcheck shell=bash
# Section 1 — verdict cost: ns/packet of the TC verdict paths through
# BPF_PROG_TEST_RUN as a ratio to a pass-through TC program (bench/verdict_bench
# alternates the two per round and reports medians), with the fixture's two L4
# entries and with 10 / 1k / 10k entries in the session's zn_l4_allow trie.
# Target: drop and DNS paths <= 1.5x pass-through. Figures without a rule
# count run with the fixture's two L4 rules; "(N L4 rules)" adds N entries to
# the trie next to those two; "(7501 port-only L4 rules)" has no any-port
# rule, so a denied port no rule names skips the trie (zn_l4_summary).

section_verdict() {
  local repeat=1000000 out line name rules ns base r target op label
  [ "$QUICK" = 1 ] && repeat=100000
  out="$WORK/verdict_bench.txt"
  # In a namespace of its own: the fixture datapath opens loopback listeners.
  scratch_netns v
  ip netns exec "$SCRATCH_NS" "$BUILD_DIR/bench/verdict_bench" "$repeat" "$ROUNDS" --l4-rules 10,1000,10000 > "$out"
  record_meta verdict_repeat "$repeat"
  grep '^RESULT ' "$out" | while read -r line; do
    name=$(sed -n 's/.* name=\([^ ]*\).*/\1/p' <<< "$line")
    rules=$(sed -n 's/.* rules=\([^ ]*\).*/\1/p' <<< "$line")
    ns=$(sed -n 's/.* ns=\([^ ]*\).*/\1/p' <<< "$line")
    base=$(sed -n 's/.* base_ns=\([^ ]*\).*/\1/p' <<< "$line")
    r=$(sed -n 's/.* ratio=\([^ ]*\).*/\1/p' <<< "$line")
    target=$(sed -n 's/.* target=\([^ ]*\).*/\1/p' <<< "$line")
    op="<="
    awk -v t="$target" 'BEGIN { exit !(t > 0) }' || { op=""; target=""; }
    case $rules in
      fixture) label="$name" ;;
      0) label="$name (no L4 rules)" ;;
      port-only) label="$name (7501 port-only L4 rules)" ;;
      *) label="$name ($rules L4 rules)" ;;
    esac
    record_figure verdict "$label" ns/pkt "$ns" "pass-through" "$base" "$r" "$op" "$target"
  done
  sed 's/^/  /' "$out" | grep -v '^  RESULT' >&2
}
