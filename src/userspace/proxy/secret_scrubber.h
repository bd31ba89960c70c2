// Scrubbing injected secrets out of what an upstream sends back.
//
// The sandbox must never hold a reusable key, yet an upstream that echoes the
// request (httpbin's /headers, an error page quoting it, a Location or
// Set-Cookie built from it) would hand the injected credential straight back.
// On every intercepted connection of a session that may inject secrets
// (armed at its first request with all of them), every byte of every
// response (head and decoded body) goes through a SecretScrubber::Stream, which replaces each occurrence of
// the secret, in each encoding an echoing server plausibly applies, with a marker of the same length:
// Content-Length framing stays right without buffering.
//
// Cost is linear and independent of the number of secrets and encodings: all
// patterns go into one Aho-Corasick automaton (a dense DFA over the byte
// classes that occur in the patterns), built once per connection when the
// first secret is injected, and each byte of a response is looked at once.
// Hyperscan (libhyperscan-dev) was considered: it has streaming and
// leftmost start-of-match, but no replacement, is packaged for amd64 only,
// and start-of-match in streaming mode costs stream state; for a few dozen
// literals per connection this automaton is smaller and easier to wipe.
//
// What counts as "the secret in an encoding" (see secret_patterns):
//   raw; base64, standard and URL-safe alphabets, at the three byte
//   alignments, padding ignored, so the secret is found inside a longer blob
//   (Basic user:secret); URL-encoded (RFC 3986, form and PHP/Java/JS
//   encoder keep-sets, upper and lower hex, `+` or %20 for space);
//   JSON-escaped (with or without `\/`, ASCII-only `\uXXXX` in either hex
//   case, Go's HTML-safe escapes); HTML-escaped (the quote styles of
//   Python, PHP, Go and Ruby); hex, lower and upper case.
// Not covered: encodings nested in each other (base64 of a URL-encoded
// secret), hashes, case changes, compression (the proxy asks for identity
// and refuses a compressed body it would have to scan).
//
// Short secrets: encoded forms are only searched for secrets of at least
// kMinEncodedSecret bytes; a shorter secret is still scrubbed raw (its raw
// bytes never reach the guest), but its encodings are so short that they
// would match ordinary text, and a secret that short is guessable anyway.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zn::proxy {

enum class SecretEncoding : uint8_t { kRaw, kBase64, kBase64Url, kUrl, kJson, kHtml, kHex };
inline constexpr size_t kSecretEncodings = 7;
std::string_view encoding_name(SecretEncoding e);

struct SecretPattern {
  std::string bytes;
  SecretEncoding encoding = SecretEncoding::kRaw;
};

// Every distinct byte string the secret is looked for as; raw first.
std::vector<SecretPattern> secret_patterns(std::string_view secret);

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
  // The automaton costs 4 bytes x states x byte classes per connection (a
  // 30-byte token: ~250 states x ~60 classes, 60 KiB; a 2 KiB JWT ~5 MiB).
  // Beyond this (8 MiB) a secret is refused rather than held.
  static constexpr size_t kMaxTableEntries = size_t{1} << 21;
  // Recognisable in tests and logs, repeated and truncated to the match.
  static constexpr std::string_view kMarker = "zn-redacted-";

  SecretScrubber() = default;
  ~SecretScrubber();  // wipes patterns and automaton: both spell the secrets
  SecretScrubber(const SecretScrubber&) = delete;
  SecretScrubber& operator=(const SecretScrubber&) = delete;

  // Adds a secret (labelled, e.g. the identity name) and rebuilds the
  // automaton; a secret already present is a no-op. False when the secret is
  // empty or the scrubber is full (the caller must then not inject).
  bool add_secret(std::string_view secret, std::string_view label);
  bool armed() const { return !secrets_.empty(); }
  size_t longest() const { return longest_; }
  size_t patterns() const { return pattern_count_; }
  size_t states() const { return depth_.size(); }
  const std::string& label(size_t i) const { return labels_[i]; }
  size_t secret_count() const { return secrets_.size(); }
  // Forgets every secret and wipes the memory that held them.
  void clear();

  // One response stream (a head, or a decoded body). Bytes come out in
  // order, scrubbed; at most longest()-1 bytes (exactly: the length of the
  // current partial match) are held back between feeds until finish().
  // The stream must not outlive its scrubber, nor the scrubber change while
  // a stream runs.
  class Stream {
   public:
    explicit Stream(const SecretScrubber& s) : s_(s) {}
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    // Appends to `out` what of pending+in can no longer be part of a match.
    void feed(std::string_view in, std::string& out);
    // Appends the bytes held back; the stream can then start again.
    void finish(std::string& out);
    const ScrubReport& report() const { return report_; }
    size_t held() const { return pending_.size(); }

   private:
    const SecretScrubber& s_;
    uint32_t state_ = 0;
    std::string pending_;
    uint64_t consumed_ = 0;                 // bytes fed so far: out[scan] is byte consumed_
    uint64_t run_start_ = 0, run_end_ = 0;  // the last redacted run, in stream positions
    ScrubReport report_;
  };

  // A complete buffer (a response head), scrubbed in place.
  ScrubReport scrub(std::string& buf) const;

 private:
  void build();
  void wipe_automaton();

  std::vector<std::string> secrets_, labels_;
  // The automaton: states 0..n-1, root 0; next_[state * classes_ + class]
  // is the target state's row (target * classes_), | kMatchFlag when a
  // pattern ends at the target.
  static constexpr uint32_t kMatchFlag = 0x80000000u;
  uint8_t class_of_[256] = {};
  size_t classes_ = 1;
  std::vector<uint32_t> next_;
  std::vector<uint16_t> depth_;      // length of the prefix a state stands for
  std::vector<uint16_t> match_len_;  // longest pattern ending here, 0 if none
  std::vector<uint32_t> match_enc_;  // encodings of the patterns ending here
  std::vector<uint64_t> match_sec_;  // secrets of the patterns ending here
  size_t longest_ = 0;
  size_t pattern_count_ = 0;
};

}  // namespace zn::proxy
