# bench/results/<date>.json -> markdown: one table per section (figure,
# value, baseline, ratio, target, met/missed), then what was skipped and why.
def fmt: if . == null then "–" elif type == "number" then
    (if . >= 100 then (. * 10 | round / 10) elif . >= 1 then (. * 100 | round / 100) else (. * 10000 | round / 10000) end | tostring)
  else tostring end;
def verdict: if .met == null then "–" elif .met then "met" else "**missed**" end;
"# zeroness benchmark \(.run.date)",
"",
"Commit `\(.run.commit)`\(if .run.worktree_dirty then " (uncommitted changes)" else "" end), build \(.run.build_type), kernel \(.run.kernel), \(.run.cpus) CPUs (\(.run.cpu)); \(.run.rounds) alternating rounds per figure, medians\(if .run.quick then "; **quick smoke run** (short, few rounds: indicative only)" else "" end).",
"Every ratio is figure / baseline measured in the same run (A B A B …).",
"",
# sections in the order they ran
(.figures | to_entries | group_by(.value.section) | sort_by(.[0].key) | map(map(.value)) | .[] |
  "## \(.[0].section)",
  "",
  ( [.[] | select(.status == "ok")] as $ok |
    if ($ok | length) > 0 then
      "| figure | value | baseline | ratio | target | met/missed |",
      "| --- | ---: | --- | ---: | --- | --- |",
      ($ok[] | "| \(.name)\(if .note then " (\(.note))" else "" end) | \(.value | fmt) \(.unit) | \(.baseline_name): \(.baseline | fmt) | \(.ratio | fmt)x | \(.target // "–") | \(verdict) |"),
      ""
    else empty end ),
  ( [.[] | select(.status != "ok")] as $rest |
    if ($rest | length) > 0 then
      ($rest[] | "- **\(.name)**: \(.status) — \(.why)"), ""
    else empty end )),
"## Targets",
"",
"\([.figures[] | select(.met == true)] | length) met, \([.figures[] | select(.met == false)] | length) missed: \([.figures[] | select(.met == false) | "\(.section)/\(.name)"] | join(", "))",
"",
"Run facts: \(.run | del(.date, .commit, .worktree_dirty, .build_type, .kernel, .cpus, .cpu, .rounds, .quick) | tojson)"
