// Hyperscan (Intel's multi-pattern regex engine, Debian's libhyperscan-dev)
// against the scrubber's own automaton (secret_scrubber.h) on the same
// bodies, secrets and 16 KiB reads as http_bench, in one binary:
//   scrub_ours_*          the scrubber: the as-sent view and both canonical
//                         views, with replacement (what the proxy runs);
//   hs_literal_*          Hyperscan streaming over the secrets as literals:
//                         the as-sent view's search alone, no replacement;
//   hs_escapes_*          Hyperscan streaming over one expression per secret
//                         that spells each byte plain or as any escape the
//                         canonical view decodes (%HH, \xHH, \u00HH, &#D;,
//                         &#xH;, hex in either case, NUL/CR/LF between),
//                         with start of match (needed to redact): the
//                         escapes view's search alone.
// Built where libhyperscan-dev is installed (apt-get install
// libhyperscan-dev; not a dependency of zerod or of the tests).
// What it decides: whether replacing the automaton's search with Hyperscan
// could make the scrub faster, keeping the encodings rule (the escapes
// view cannot be a list of literals: escapes mix byte by byte).
#include <benchmark/benchmark.h>
#include <hs/hs.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "scrub_bench.h"

namespace {

using zn::bench::random_body;
using zn::bench::response_body;
using zn::bench::secret_for;

using zn::bench::kScrubRead;

// A hex digit matched in either case.
std::string hex_digit(unsigned v) {
  const char* digits = "0123456789abcdef";
  const char c = digits[v & 0xf];
  if (c < 'a') return std::string(1, c);
  return std::string("[") + c + static_cast<char>(c - 'a' + 'A') + "]";
}

std::string hex_byte(unsigned char b) { return hex_digit(b >> 4) + hex_digit(b); }

// One expression for `secret`: each byte plain or escaped, and with
// `gaps` the dropped bytes (NUL, CR, LF; at most 8 in a row) between.
std::string escapes_expression(const std::string& secret, bool gaps) {
  std::string e;
  for (const unsigned char b : secret) {
    char plain[8];
    std::snprintf(plain, sizeof plain, "\\x%02x", b);
    if (gaps) e += "[\\x00\\r\\n]{0,8}";
    e += "(?:";
    e += plain;
    e += "|%" + hex_byte(b);
    e += "|\\\\[xX]" + hex_byte(b);
    e += "|\\\\u00" + hex_byte(b);
    e += "|&#0*" + std::to_string(b) + ";";
    e += "|&#[xX]0*" + hex_byte(b) + ";";
    e += ")";
  }
  return e;
}

struct Database {
  hs_database_t* db = nullptr;
  hs_scratch_t* scratch = nullptr;
  ~Database() {
    hs_free_scratch(scratch);
    hs_free_database(db);
  }
};

void compile(Database& d, const std::vector<std::string>& expressions, bool literal, bool start_of_match) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lengths;
  std::vector<unsigned> flags, ids;
  for (size_t i = 0; i < expressions.size(); ++i) {
    ptrs.push_back(expressions[i].c_str());
    lengths.push_back(expressions[i].size());
    flags.push_back(start_of_match ? HS_FLAG_SOM_LEFTMOST : 0);
    ids.push_back(static_cast<unsigned>(i));
  }
  const unsigned mode = HS_MODE_STREAM | (start_of_match ? HS_MODE_SOM_HORIZON_SMALL : 0);
  hs_compile_error_t* error = nullptr;
  const hs_error_t rc =
      literal ? hs_compile_lit_multi(ptrs.data(), flags.data(), ids.data(), lengths.data(),
                                     static_cast<unsigned>(ptrs.size()), mode, nullptr, &d.db, &error)
              : hs_compile_multi(ptrs.data(), flags.data(), ids.data(), static_cast<unsigned>(ptrs.size()),
                                 mode, nullptr, &d.db, &error);
  if (rc != HS_SUCCESS) {
    const std::string why = error ? error->message : "hs_compile failed";
    hs_free_compile_error(error);
    throw std::runtime_error(why);
  }
  if (hs_alloc_scratch(d.db, &d.scratch) != HS_SUCCESS) throw std::runtime_error("hs_alloc_scratch failed");
}

int count_match(unsigned, unsigned long long, unsigned long long, unsigned, void* context) {
  ++*static_cast<uint64_t*>(context);
  return 0;
}

uint64_t hs_in_reads(const Database& d, const std::string& body) {
  uint64_t matches = 0;
  hs_stream_t* stream = nullptr;
  hs_open_stream(d.db, 0, &stream);
  for (size_t at = 0; at < body.size(); at += kScrubRead) {
    const std::string_view piece = std::string_view(body).substr(at, kScrubRead);
    hs_scan_stream(stream, piece.data(), static_cast<unsigned>(piece.size()), 0, d.scratch, count_match,
                   &matches);
  }
  hs_close_stream(stream, d.scratch, count_match, &matches);
  return matches;
}

std::vector<std::string> secrets(int64_t n) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(secret_for(static_cast<size_t>(i)));
  return out;
}

enum class Set { kLiteral, kEscapes, kEscapesWithStart, kEscapesGapsWithStart };

void run_hs(benchmark::State& state, const std::string& body, Set set) {
  Database d;
  std::vector<std::string> expressions = secrets(state.range(0));
  if (set != Set::kLiteral)
    for (std::string& e : expressions) e = escapes_expression(e, set != Set::kEscapesWithStart);
  try {
    compile(d, expressions, set == Set::kLiteral,
            set == Set::kEscapesWithStart || set == Set::kEscapesGapsWithStart);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  uint64_t matches = 0;
  for (auto _ : state) {
    matches = hs_in_reads(d, body);
    benchmark::DoNotOptimize(matches);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["matches"] = static_cast<double>(matches);
}

void scrub_ours_json(benchmark::State& state) { zn::bench::run_scrub(state, response_body()); }
BENCHMARK(scrub_ours_json)->Arg(1)->Arg(16);
void hs_literal_json(benchmark::State& state) { run_hs(state, response_body(), Set::kLiteral); }
BENCHMARK(hs_literal_json)->Arg(1)->Arg(16);
void hs_escapes_json(benchmark::State& state) { run_hs(state, response_body(), Set::kEscapes); }
BENCHMARK(hs_escapes_json)->Arg(1)->Arg(16);
void hs_escapes_start_json(benchmark::State& state) {
  run_hs(state, response_body(), Set::kEscapesWithStart);
}
BENCHMARK(hs_escapes_start_json)->Arg(1)->Arg(16);
void hs_escapes_gaps_start_json(benchmark::State& state) {
  run_hs(state, response_body(), Set::kEscapesGapsWithStart);
}
BENCHMARK(hs_escapes_gaps_start_json)->Arg(1);

void scrub_ours_random(benchmark::State& state) { zn::bench::run_scrub(state, random_body()); }
BENCHMARK(scrub_ours_random)->Arg(1)->Arg(16);
void hs_literal_random(benchmark::State& state) { run_hs(state, random_body(), Set::kLiteral); }
BENCHMARK(hs_literal_random)->Arg(1)->Arg(16);
void hs_escapes_random(benchmark::State& state) { run_hs(state, random_body(), Set::kEscapes); }
BENCHMARK(hs_escapes_random)->Arg(1)->Arg(16);
void hs_escapes_start_random(benchmark::State& state) {
  run_hs(state, random_body(), Set::kEscapesWithStart);
}
BENCHMARK(hs_escapes_start_random)->Arg(1)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
