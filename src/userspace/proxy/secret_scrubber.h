// Scrubbing injected secrets out of what an upstream sends back.
//
// The sandbox must never hold a reusable key, yet an upstream that echoes the
// request (httpbin's /headers, an error page quoting it, a Location or
// Set-Cookie built from it) would hand the injected credential straight back.
// On every intercepted connection of a session that may inject secrets
// (armed at its first request with all of them), every byte of every
// response (head and decoded body) goes through a SecretScrubber::Stream,
// which replaces each occurrence of the secret, however spelled (below),
// with a marker of the same length: Content-Length framing stays right
// without buffering.
//
// The rule: a secret is found in three views of the same bytes, and the
// source bytes of a match, in any view, are redacted.
//   1. As sent, for the secret's standard spellings (secret_patterns):
//      raw; base64 (standard and URL-safe alphabets, three alignments,
//      padding ignored, so inside a longer blob such as Basic user:secret);
//      URL-, JSON- and HTML-escaped as common encoders write them; hex in
//      either case. No neighbouring byte can change how these read.
//   2. Canonical (canonical_view.h, Canonicaliser::kEscapes): NUL, CR and
//      LF dropped (UTF-16/UTF-32 of ASCII, wrapped base64), then one level
//      of escapes decoded, whichever bytes were escaped and in either hex
//      case: %HH, \xHH, \uHHHH (surrogate pairs), JSON/JS backslash escapes,
//      HTML/XML numeric and the five XML named references. RFC 5987/2231
//      extended values are percent-encoding.
//   3. Quoted-printable (Canonicaliser::kQuotedPrintable): =HH decoded, soft
//      line breaks and NUL/CR/LF dropped (its own view: "k=41" in a query is
//      not a byte).
// In views 2 and 3 the secret is looked for as itself, its canonical form,
// with its spaces as '+' (forms) or '_' (RFC 2047), as UTF-16/UTF-32 with
// the zero bytes dropped (Latin-1 too), and as every spelling of view 1
// (so base64 wrapped at any width, or percent-escaped, is found).
// A head (scrub()) is also searched with each header's RFC 2231
// continuations (name*0*=..; name*1*=..) joined.
//
// Cost is linear and independent of the number of secrets and spellings:
// all patterns go into one Aho-Corasick automaton (a dense DFA over the
// byte classes that occur in the patterns), built once per list of secrets
// and shared by every connection and stream armed with that list (building
// one per HTTP/2 stream was a fifth of zerod's time under h2load). The
// automaton runs only where it can matter: a match of two bytes or more
// ends on a pair of bytes that follow each other in some pattern, and after
// two bytes that are not such a pair its state is the root's step on the
// second. A prefilter (byte_set_scan.h, AVX2) marks where pairs may end and
// which bytes are not plain in each canonical view; the as-sent view steps
// only through runs of pairs, and a canonical view, once back in the
// as-sent view's state inside a plain run, skips to its next byte that is
// not plain, passing escape leads that are given up at once and dropped
// bytes between two bytes that are no pair (scan_view). Every shortcut is
// checked against stepping every byte (scrub_by_rule_test). bench/http_bench
// on this 2-core machine, 1-16 secrets: 64 KiB of random bytes 0.8-1.3 GB/s
// per core (180 MB/s when the views skipped only in step and the as-sent
// view stepped every byte), 64 KiB JSON 400-550 MB/s (240).
// Hyperscan (libhyperscan-dev) was considered: it has streaming and
// leftmost start-of-match, but no replacement, is packaged for amd64 only,
// and start-of-match in streaming mode costs stream state; for a few dozen
// literals per connection this automaton is smaller and easier to wipe.
//
// Not covered: encodings nested in each other beyond one level of escapes
// (base64 of a URL-encoded secret), hashes, case changes, compression (the
// proxy asks for identity and refuses a compressed body it would have to
// scan), and what canonical_view.h lists.
//
// Short secrets: only the raw secret is searched for secrets shorter than
// kMinEncodedSecret bytes (its raw bytes never reach the guest); its other
// spellings are so short that they would match ordinary text, and a secret
// that short is guessable anyway.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/proxy/canonical_view.h"

namespace zn::proxy {

// kDecoded: found in a canonical view (escapes decoded, line breaks, NULs
// dropped); kSplit: a partial match redacted at a message end (end_message).
enum class SecretEncoding : uint8_t { kRaw, kBase64, kBase64Url, kUrl, kJson, kHtml, kHex, kDecoded, kSplit };
inline constexpr size_t kSecretEncodings = 9;
std::string_view encoding_name(SecretEncoding e);

struct SecretPattern {
  std::string bytes;
  SecretEncoding encoding = SecretEncoding::kRaw;
};

// Every distinct byte string the secret is looked for as in the bytes as
// sent (view 1); raw first.
std::vector<SecretPattern> secret_patterns(std::string_view secret);
// What is looked for in the canonical views besides those (views 2 and 3).
std::vector<SecretPattern> canonical_patterns(std::string_view secret);

// What a scrubber replaced, for the audit (never the value).
struct ScrubReport {
  uint64_t matches = 0;
  uint32_t encodings = 0;  // bit (1 << SecretEncoding)
  uint64_t secrets = 0;    // bit i: the i-th secret added (its label)

  void merge(const ScrubReport& o) {
    matches += o.matches;
    encodings |= o.encodings;
    secrets |= o.secrets;
  }
  std::vector<std::string> encoding_names() const;
};

class SecretScrubber {
 public:
  static constexpr size_t kMinEncodedSecret = 8;
  static constexpr size_t kMaxSecrets = 64;
  static constexpr size_t kMaxSecretBytes = 4096;  // escaped forms stay within a state's uint16 depth
  // The automaton costs 4 bytes x states x byte classes per list (a
  // 30-byte token: ~250 states x ~60 classes, 60 KiB; a 2 KiB JWT ~5 MiB).
  // Beyond this (8 MiB) a secret is refused rather than held.
  static constexpr size_t kMaxTableEntries = size_t{1} << 21;
  // Recognisable in tests and logs, repeated and truncated to the match.
  static constexpr std::string_view kMarker = "zn-redacted-";

  // The built automaton of one list of secrets: immutable, shared by every
  // scrubber armed with the same list (the streams of an HTTP/2 connection,
  // a session's connections), wiped when the last one lets it go.
  struct Automaton;

  SecretScrubber();
  ~SecretScrubber();
  SecretScrubber(const SecretScrubber&) = delete;
  SecretScrubber& operator=(const SecretScrubber&) = delete;

  // Adds a secret (labelled, e.g. the identity name): the automaton of the
  // list with it is taken from those alive (built once per list, not per
  // connection or stream) or built; a secret already present is a no-op.
  // False when the secret is empty or the scrubber is full (the caller must
  // then not inject).
  bool add_secret(std::string_view secret, std::string_view label);
  // Each (secret, label) as add_secret would take it, with one automaton
  // for them all (not one per secret added); false if any was refused.
  bool add_secrets(const std::vector<std::pair<std::string_view, std::string_view>>& list);
  bool armed() const;
  size_t longest() const;
  size_t patterns() const;
  size_t states() const;
  const std::string& label(size_t i) const;
  size_t secret_count() const;
  // Whether both hold the same built automaton (one list of secrets).
  bool shares_automaton_with(const SecretScrubber& o) const { return a_ && a_ == o.a_; }
  // Forgets every secret; the memory that held them is wiped once no other
  // scrubber holds the same list.
  void clear();

  // The automata armed most recently stay built for a while with nobody
  // holding them (at most kWarmAutomata, each kWarmFor after its last
  // arming), so that a guest opening one connection after another does not
  // have its session's automaton rebuilt for each. forget_warm() lets them
  // go at once (a session deleted, its secrets changed); each is wiped when
  // its last holder lets it go.
  static constexpr size_t kWarmAutomata = 8;
  static constexpr std::chrono::seconds kWarmFor{30};
  static void forget_warm();
  // Automata built since the process started (every arming that found none
  // alive or warm): for tests and diagnostics.
  static uint64_t automata_built();

  // One response stream (a head, or a decoded body). Bytes come out in
  // order, scrubbed; held back between feeds (until finish()) are the bytes
  // that may still be part of a match in any view: the current partial
  // match's source bytes and an escape not yet complete. The output does
  // not depend on where the input is cut. The stream holds the automaton
  // its scrubber had when it was made (secrets added later are for later
  // streams).
  class Stream {
   public:
    // kDetect: matches are reported, the bytes go out as they came (the
    // request screen, which refuses rather than redacts).
    enum class Mode : uint8_t { kRedact, kDetect };
    explicit Stream(const SecretScrubber& s, Mode mode = Mode::kRedact);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    // Appends to `out` what of the held bytes and `in` can no longer be part
    // of a match.
    void feed(std::string_view in, std::string& out);
    // A unit of the stream ends that must be delivered whole now (a
    // WebSocket message), but the stream goes on: every held byte goes out,
    // those of a partial match of at least boundary_redaction() bytes
    // redacted first; the views keep their state, so a secret continued in
    // the next unit is still found (and redacted from there on).
    void end_message(std::string& out);
    // Appends the bytes held back; the stream can then start again.
    void finish(std::string& out);
    const ScrubReport& report() const { return report_; }
    // Every match found from now on, in any view, as [start, end) offsets
    // into the stream's source bytes (for a caller that hides them its own
    // way: the approval's body preview).
    void record_matches(std::vector<std::pair<uint64_t, uint64_t>>* sink) { matches_out_ = sink; }
    size_t held() const { return pending_.size(); }
    // Tests: the canonical views step every byte (no skipping ahead in
    // the as-sent view's state), the reference the skipping must agree with.
    void step_every_byte() { skip_ = false; }

   private:
    struct View {
      explicit View(Canonicaliser::Mode m) : canon(m) {}
      Canonicaliser canon;
      uint32_t row = 0;
      uint64_t count = 0;          // canonical bytes so far
      std::vector<uint64_t> ring;  // source start of the last canonical bytes
      // In the as-sent view's state since a plain byte that followed a
      // plain byte it is not a pattern pair with: the view skips to its
      // next byte that is not plain (scan_view).
      bool synced = false;
    };
    void mark(size_t from);
    void scan_identity(size_t from);
    void scan_view(View& v, size_t from);
    void scan_identity_every_byte(size_t from);
    void scan_view_every_byte(View& v, size_t from);
    uint32_t as_sent_after(size_t p, size_t from) const;
    void leave_sync(View& v, size_t from, size_t skipped_from, size_t to);
    void step(View& v, int byte, uint64_t start, uint64_t end);
    void matched(uint32_t state, uint64_t start, uint64_t end, bool canonical);
    void redact(uint64_t start, uint64_t end);
    uint64_t hold_from() const;
    void emit_until(uint64_t to, std::string& out);
    void reset();

    std::shared_ptr<const Automaton> a_;
    const Automaton& s_;  // *a_
    Mode mode_;
    uint32_t row_ = 0;         // the as-sent view's state (row offset)
    uint32_t row_before_ = 0;  // ... before the feed being scanned
    // The prefilter of the feed being scanned, a bit per byte from its
    // first (mark()): a pattern pair may end here; a first byte of a pair;
    // not plain in the escapes view, in the quoted-printable view.
    std::vector<uint64_t> pair_marks_, first_marks_, escape_marks_, qp_marks_;
    bool skip_ = true;
    std::string pending_;  // source bytes not yet out; pending_[0] is byte base_
    uint64_t base_ = 0, consumed_ = 0;
    View escapes_{Canonicaliser::Mode::kEscapes}, qp_{Canonicaliser::Mode::kQuotedPrintable};
    uint64_t ring_mask_ = 0;
    // Redacted runs not yet all out, sorted, merged: [start, end).
    std::vector<std::pair<uint64_t, uint64_t>> runs_;
    ScrubReport report_;
    std::vector<std::pair<uint64_t, uint64_t>>* matches_out_ = nullptr;
  };

  // How long a partial match held at end_message must be to be redacted:
  // long enough that a guest cannot learn a secret's first bytes by
  // guessing them (12 bytes, or half the shortest pattern it can complete,
  // at least 4), short enough that a secret cut there keeps most of itself.
  size_t boundary_redaction(uint32_t state) const;

  // A complete buffer (a response head), scrubbed in place; RFC 2231
  // continuations are also searched joined.
  ScrubReport scrub(std::string& buf) const;
  // The same search without changing anything (the request screen).
  ScrubReport detect(std::string_view buf) const;

 private:
  std::shared_ptr<const Automaton> a_;
};

}  // namespace zn::proxy
