// The canonical views the secret scrubber and the request screen search
// besides the bytes as sent (secret_scrubber.h): text with one level of
// escapes decoded, whichever bytes were escaped and in either hex case, and
// line breaks and NULs dropped, so that a secret is found by rule however a
// server or a guest chose to spell it, not by a list of encoders.
//
// The rule, applied to a stream byte by byte (each canonical byte keeps the
// source position where its spelling starts, so a match maps back to the
// source bytes to redact):
//   - NUL is dropped before anything else: UTF-16 (LE or BE) and UTF-32 of
//     ASCII become ASCII; a BOM before the text does not matter to a search.
//   - CR and LF are dropped, source or decoded: base64 wrapped at any width
//     (MIME's 76 columns, PEM's 64) becomes contiguous.
//   - kEscapes decodes, greedily from the left, %HH; \xHH; \uHHHH (a
//     surrogate pair to its UTF-8); \" \\ \/ \' \b \f \n \r \t; HTML/XML
//     numeric references &#D..; (1-7 digits) and &#xH..; (1-6 hex digits)
//     to UTF-8; &amp; &lt; &gt; &quot; &apos; (any case). RFC 5987/2231
//     extended values (UTF-8''%..) are percent-encoding.
//   - kQuotedPrintable decodes =HH and drops soft line breaks (=CRLF, =LF).
//     It is a view of its own: in a query or a form "k=41..." is a key and
//     a value, not a byte, and one greedy parse cannot be both.
// A run of more than kMaxDropped dropped bytes breaks the view (no match
// spans it), which also bounds how far back a partial match can reach.
//
// Not covered by the views: escapes nested in escapes (%2541 is "%41" here,
// one level); the first or last escape of an unusual spelling eaten by an
// adjacent attacker-chosen byte ("\u00" + "41..."): the standard spellings
// are also searched as sent, where no neighbour can change them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zn::proxy {

// The UTF-8 bytes of code point cp (at most 0x10FFFF) in out; their count.
size_t encode_utf8(uint32_t cp, unsigned char out[4]);

namespace canonical_detail {
// Bytes that are their own canonical byte when no escape is pending, per
// mode: not an escape lead, not dropped.
struct PlainTable {
  uint8_t t[2][256];
  constexpr PlainTable() : t{} {
    for (int m = 0; m < 2; ++m)
      for (int c = 0; c < 256; ++c) {
        const bool lead = m == 0 ? (c == '%' || c == '\\' || c == '&') : c == '=';
        t[m][c] = !(lead || c == 0 || c == '\r' || c == '\n');
      }
  }
};
inline constexpr PlainTable kPlain{};
}  // namespace canonical_detail

class Canonicaliser {
 public:
  enum class Mode : uint8_t { kEscapes, kQuotedPrintable };
  static constexpr size_t kMaxDropped = 8;
  static constexpr int kBreak = -1;  // what emit() gets when a run of dropped bytes breaks the view
  static constexpr uint64_t kNone = UINT64_MAX;

  explicit Canonicaliser(Mode mode) : mode_(mode) {}
  ~Canonicaliser();
  Canonicaliser(const Canonicaliser&) = delete;
  Canonicaliser& operator=(const Canonicaliser&) = delete;

  // Takes the source byte at position `pos`; calls emit(int byte, uint64_t
  // start, uint64_t end) for each canonical byte it completes ([start, end):
  // the source bytes of its spelling), or emit(kBreak, pos, pos).
  template <typename Emit>
  void push(unsigned char c, uint64_t pos, Emit&& emit) {
    if (c == 0) return drop(pos, emit);
    if (len_ == 0) {
      if (!is_lead(c)) {
        if (c == '\r' || c == '\n') return drop(pos, emit);
        dropped_ = 0;
        emit(static_cast<int>(c), pos, pos + 1);
        return;
      }
    }
    take(c, pos, emit);
  }
  // The fast path of a caller: with no escape pending, a byte for which
  // plain() is true is itself the next canonical byte ([pos, pos + 1)); the
  // caller takes it without push() and calls took_plain() before the next
  // push().
  bool idle() const { return len_ == 0; }
  bool plain(unsigned char c) const { return canonical_detail::kPlain.t[static_cast<size_t>(mode_)][c] != 0; }
  void took_plain() { dropped_ = 0; }
  // Takes `count` dropped bytes at once, no escape pending (as push() would
  // each); true if they break the view (where push() emits kBreak).
  bool take_dropped(size_t count) {
    const bool before = dropped_ <= kMaxDropped;
    dropped_ += count;
    return before && dropped_ > kMaxDropped;
  }
  // Whether byte c is dropped (NUL, CR, LF) when no escape is pending.
  static bool dropped(unsigned char c) { return c == 0 || c == '\r' || c == '\n'; }
  // Whether an escape lead read with no escape pending, followed by `next`,
  // is given up at once: the lead is then its own canonical byte, and the
  // view reads on from `next` as if no escape had been pending (a caller
  // may take such a lead as plain). From this class's own rules, probed
  // once per pair.
  static bool literal_lead(Mode mode, unsigned char lead, unsigned char next);
  // Where an escape not yet complete starts, kNone if none.
  uint64_t pending_from() const { return len_ == 0 ? kNone : pos_[0]; }
  // The end of the stream: a pending escape's bytes are literal.
  template <typename Emit>
  void flush(Emit&& emit) {
    while (len_ > 0) give_up(emit);
  }
  void reset();

 private:
  static constexpr size_t kMaxEscape = 12;  // \uD83D\uDE00
  enum class Verdict : uint8_t { kPrefix, kInvalid, kComplete };

  bool is_lead(unsigned char c) const {
    return mode_ == Mode::kEscapes ? (c == '%' || c == '\\' || c == '&') : c == '=';
  }
  template <typename Emit>
  void drop(uint64_t pos, Emit& emit) {
    if (++dropped_ == kMaxDropped + 1) emit(kBreak, pos, pos);
  }
  // Judges esc_[0..len_): a spelling still growing, none, or complete with
  // its code point (cp_, or raw byte when byte_) or nothing (a soft break).
  Verdict judge();
  template <typename Emit>
  void take(unsigned char c, uint64_t pos, Emit& emit) {
    // A byte of an escape is not dropped: UTF-16 or UTF-32 of a long escape
    // (\uD83D\uDE00) has its zero bytes spread between such bytes.
    if (c != '\r' && c != '\n') dropped_ = 0;
    esc_[len_] = c;
    pos_[len_] = pos;
    ++len_;
    switch (judge()) {
      case Verdict::kPrefix:
        return;
      case Verdict::kComplete:
        complete(emit);
        return;
      case Verdict::kInvalid:
        give_up(emit);
        return;
    }
  }
  template <typename Emit>
  void complete(Emit& emit) {
    const uint64_t start = pos_[0], end = pos_[len_ - 1] + 1;
    len_ = 0;
    if (soft_break_) return;
    unsigned char out[4];
    size_t n = 0;
    if (byte_) {
      out[n++] = static_cast<unsigned char>(cp_);
    } else {
      n = encode_utf8(cp_, out);
    }
    for (size_t i = 0; i < n; ++i) {
      if (dropped(out[i])) {
        drop(start, emit);
        continue;
      }
      dropped_ = 0;
      emit(static_cast<int>(out[i]), start, end);
    }
  }
  // The lead is literal after all; what followed it is read again.
  template <typename Emit>
  void give_up(Emit& emit) {
    unsigned char rest[kMaxEscape];
    uint64_t rest_pos[kMaxEscape];
    const size_t n = len_ - 1;
    std::copy(esc_ + 1, esc_ + len_, rest);
    std::copy(pos_ + 1, pos_ + len_, rest_pos);
    dropped_ = 0;
    emit(static_cast<int>(esc_[0]), pos_[0], pos_[0] + 1);
    len_ = 0;
    for (size_t i = 0; i < n; ++i) push(rest[i], rest_pos[i], emit);
  }

  Mode mode_;
  unsigned char esc_[kMaxEscape] = {};
  uint64_t pos_[kMaxEscape] = {};
  size_t len_ = 0;
  size_t dropped_ = 0;
  uint32_t cp_ = 0;
  bool byte_ = false, soft_break_ = false;
};

// The whole of `s` through a canonical view (used for a secret's own
// canonical forms and for tests).
std::string canonical(std::string_view s, Canonicaliser::Mode mode);

// RFC 2231 continuations: a parameter split over name*0, name*1, ... (each
// perhaps extended, name*0*=UTF-8''..) in one header line. Each value joined
// in order, with the position in `text` of each of its bytes.
struct JoinedParameter {
  std::string value;
  std::vector<size_t> at;
};
std::vector<JoinedParameter> parameter_continuations(std::string_view text);

}  // namespace zn::proxy
