#include "userspace/proxy/scrub_fields.h"

#include <openssl/crypto.h>

#include <cstddef>
#include <string>
#include <utility>

#include "userspace/http/rewrite.h"

namespace zn::proxy {
namespace {

struct Span {
  std::string* field;
  size_t at;
};

// `start` (a status line, or nothing), then "name: value" lines, scrubbed;
// each part cut back out of the scrubbed text.
ScrubReport scrub_lines(const SecretScrubber& scrubber, std::string start, std::string* reason,
                        std::vector<http::Header>& fields) {
  std::string text = std::move(start);
  std::vector<Span> spans;
  spans.reserve(fields.size() * 2 + 1);
  if (reason) {
    spans.push_back({reason, text.size()});
    text.append(*reason).append("\r\n");
  }
  for (http::Header& h : fields) {
    spans.push_back({&h.name, text.size()});
    text.append(h.name).append(": ");
    spans.push_back({&h.value, text.size()});
    text.append(h.value).append("\r\n");
  }
  text.append("\r\n");
  const ScrubReport report = scrubber.scrub(text);
  if (report.matches)
    for (const Span& s : spans) s.field->assign(text, s.at, s.field->size());
  OPENSSL_cleanse(text.data(), text.size());
  return report;
}

}  // namespace

ScrubReport scrub_head(const SecretScrubber& scrubber, http::ResponseHead& head) {
  if (!scrubber.armed()) return {};
  if (head.reason.empty()) head.reason = std::string(http::reason_phrase(head.status));
  return scrub_lines(scrubber, "HTTP/1.1 " + std::to_string(head.status) + " ", &head.reason, head.headers);
}

ScrubReport scrub_fields(const SecretScrubber& scrubber, std::vector<http::Header>& fields) {
  if (!scrubber.armed() || fields.empty()) return {};
  return scrub_lines(scrubber, {}, nullptr, fields);
}

}  // namespace zn::proxy
