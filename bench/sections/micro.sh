# shellcheck shell=bash
# Section 4 — micro-benchmarks (Google Benchmark): bench/policy_match_bench
# (CompiledPolicy::match_host (exact, wildcard, deny, miss) and match_request
# at 10 / 1k / 10k rules, host name normalisation, wildcard pattern parsing
# and path glob matching), bench/http_bench (request head parsing and
# rewriting, target normalisation), bench/leaf_cert_bench (leaf cache miss,
# i.e. minting, vs hit) and bench/audit_post_bench (an audit record posted
# with its detail built on the writer vs on the posting loop; redacted with
# its session's secrets vs with every secret) — each a ratio to a baseline
# in the same binary.
# Repetitions are randomly interleaved (the A B A B rule); medians reported.

# micro_run NAME: runs bench/NAME with JSON output; prints the file.
micro_run() {
  local name=$1 out="$WORK/$1.json" min_time=0.2
  [ "$QUICK" = 1 ] && min_time=0.02
  "$BUILD_DIR/bench/$name" --benchmark_format=json --benchmark_out_format=json --benchmark_out="$out" \
    --benchmark_repetitions="$ROUNDS" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true --benchmark_min_time="$min_time" > /dev/null
  cp "$out" "$RESULTS_DIR/$STAMP-$name.json"
  echo "$out"
}

# micro_pairs NAME FIGURE=BASELINE...: median ns of each figure against its baseline.
micro_pairs() {
  local name=$1 out pair run base ns base_ns
  shift
  if [ ! -x "$BUILD_DIR/bench/$name" ]; then
    record_status micro "$name" skipped "not built (Google Benchmark not found by CMake)"
    return 0
  fi
  out=$(micro_run "$name")
  for pair in "$@"; do
    run=${pair%%=*} base=${pair##*=}
    ns=$(jq -r --arg r "$run" '[.benchmarks[] | select(.aggregate_name == "median" and .run_name == $r)
      | .real_time * (if .time_unit == "us" then 1000 elif .time_unit == "ms" then 1e6 else 1 end)][0] // "null"' "$out")
    base_ns=$(jq -r --arg r "$base" '[.benchmarks[] | select(.aggregate_name == "median" and .run_name == $r)
      | .real_time * (if .time_unit == "us" then 1000 elif .time_unit == "ms" then 1e6 else 1 end)][0] // "null"' "$out")
    record_figure micro "$run" ns/op "$ns" "$base" "$base_ns" "$(ratio "$ns" "$base_ns")"
  done
}

section_micro() {
  micro_pairs http_bench http_parse_request_head=baseline_find_head_end \
    http_rewrite_request_head=baseline_copy_head http_normalise_target=baseline_copy_head \
    scrub_response_body/1=baseline_memcpy_body scrub_response_body/4=baseline_memcpy_body \
    scrub_response_body/16=baseline_memcpy_body
  micro_pairs leaf_cert_bench BM_LeafForMiss=BM_LeafForHit
  micro_pairs audit_post_bench audit_post_deferred/0=audit_post_built/0 \
    audit_post_deferred/1000=audit_post_built/1000 audit_post_built/1000=audit_post_built_global/1000
  local bin="$BUILD_DIR/bench/policy_match_bench" out="$WORK/policy_match_bench.json" min_time=0.2
  if [ ! -x "$bin" ]; then
    record_status micro policy_match_bench skipped "not built (Google Benchmark not found by CMake)"
    return 0
  fi
  [ "$QUICK" = 1 ] && min_time=0.02
  "$bin" --benchmark_format=json --benchmark_out_format=json --benchmark_out="$out" \
    --benchmark_repetitions="$ROUNDS" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true --benchmark_min_time="$min_time" > /dev/null
  cp "$out" "$RESULTS_DIR/$STAMP-policy_match_bench.json"
  # Pair every median with its baseline: host lookups and match_request with
  # baseline_map_find of the same rule count, name parsing with
  # baseline_lowercase_copy, path globs with baseline_prefix_compare.
  jq -r '
    [.benchmarks[] | select(.aggregate_name == "median")
      | {run: .run_name, ns: (.real_time * (if .time_unit == "us" then 1000 elif .time_unit == "ms" then 1e6 else 1 end))}]
    | (map({key: .run, value: .ns}) | from_entries) as $t
    | sort_by(.run | split("/") | [.[0], (.[1] // "0" | tonumber)]) | .[] | select(.run | startswith("baseline_") | not)
    | (.run | split("/")) as $p
    | (if ($p[0] | startswith("match_")) then "baseline_map_find/\($p[1])"
       elif ($p[0] | startswith("host_pattern")) then "baseline_lowercase_copy"
       else "baseline_prefix_compare" end) as $b
    | [.run, .ns, $b, ($t[$b] // "null")] | @tsv' "$out" |
    while IFS=$'\t' read -r run ns base_name base; do
      record_figure micro "$run" ns/op "$ns" "$base_name" "$base" "$(ratio "$ns" "$base")"
    done
}
