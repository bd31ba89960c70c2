// Screening what a guest sends for tripwires (proxy/policy.h Tripwire): the
// canaries an operator planted in the guest, and placeholders headed for a
// request their resource's rule did not allow. The same automaton and the
// same rule as the response scrubber (secret_scrubber.h): a tripwire is
// found as sent in its standard spellings, and in the canonical views (any
// subset of bytes escaped as %HH, \xHH, \uHHHH, HTML/XML references or
// quoted-printable, line breaks and NULs dropped: a UTF-16 body, a wrapped
// base64 or quoted-printable multipart part), split across reads or chunks
// as well. A request that carries one is refused before the tripwire leaves
// the proxy. The screen reads the bytes it is given: a compressed body is
// screened by feeding it the decompressed bytes.
//
// And the swap itself: a request allowed under a rule naming a resource
// with a placeholder gets the credential in place of the placeholder, in
// header values, the query, and a JSON or form body read whole (up to
// kMaxSwappedBody). Placeholders are [a-z0-9_] only (session/placeholders.h),
// the same raw, URL-encoded or JSON-escaped; the credential is encoded for
// where it lands.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/message.h"
#include "userspace/proxy/policy.h"
#include "userspace/proxy/secret_scrubber.h"

namespace zn::proxy {

class RequestScreen {
 public:
  // Adds the session's tripwires (once per connection). False if one could
  // not be held (the scrubber is full): the caller must then refuse, as a
  // screen that cannot see is no screen.
  bool arm(const std::vector<Tripwire>& tripwires);
  bool armed() const { return scrubber_.armed(); }

  // The labels of the tripwires `report` found, less those `exempt` (the
  // request's own placeholders, swapped or headed to their own host).
  std::vector<std::string> hits(const ScrubReport& report, const std::vector<Substitution>& exempt) const;
  // Screens one complete piece (a path, a query, header lines, a body) in
  // every view (and header lines with their RFC 2231 continuations joined):
  // the guest may escape any byte, not only those an encoder would.
  std::vector<std::string> check(std::string_view bytes, const std::vector<Substitution>& exempt) const;

  const SecretScrubber& scrubber() const { return scrubber_; }

 private:
  SecretScrubber scrubber_;
};

// A body too large to read whole (or any byte stream: decompressed bytes,
// a WebSocket's messages one after another), screened as it streams, in
// every view. Bytes are released only once no tripwire that could start in
// them can still be completed (the scrubber's hold-back: a partial match's
// source bytes, an escape not yet complete), so a tripwire is found before
// any of its bytes leave, however it is spelled or cut.
class StreamScreen {
 public:
  StreamScreen(const RequestScreen& screen, const std::vector<Substitution>& exempt);
  ~StreamScreen();
  StreamScreen(const StreamScreen&) = delete;
  StreamScreen& operator=(const StreamScreen&) = delete;
  // Takes `in`; appends to `out` what may go on. Non-empty: the labels of
  // the tripwires found (stop: nothing held may go).
  std::vector<std::string> feed(std::string_view in, std::string& out);
  // A message ends that must go whole (WebSocket): what is held goes, and
  // the screen goes on with its state, so a tripwire completed by a later
  // message is still found (when its last byte arrives: the first part has
  // left by then).
  std::vector<std::string> end_message(std::string& out);
  // The end of the body: appends the rest, or returns what it found.
  std::vector<std::string> finish(std::string& out);

 private:
  std::vector<std::string> release(std::vector<std::string> hits, std::string& out);
  const RequestScreen& screen_;
  std::vector<Substitution> exempt_;  // labels only: no credential is copied
  SecretScrubber::Stream stream_;
  std::string ready_;  // what the stream released, until the verdict
};

// Bodies up to this size are read whole before the head is sent: screened
// before anything leaves, and swapped if JSON or form.
inline constexpr size_t kMaxSwappedBody = 256 * 1024;

enum class BodyKind { kOther, kJson, kForm };
BodyKind body_kind(const http::RequestHead& head);

// Replaces every occurrence of each placeholder in `text` by its credential,
// encoded by `encode` (identity, percent-encoding, JSON escaping). Returns
// how many were replaced. The old buffer is wiped when it is swapped out.
size_t swap_placeholders(std::string& text, const std::vector<Substitution>& subs, BodyKind encoding);
size_t swap_placeholders_in_query(std::string& query, const std::vector<Substitution>& subs);

}  // namespace zn::proxy
