// What the upstream sends, scrubbed of every secret the connection was
// given: a response body, or a WebSocket's messages down. One stream
// whatever the upstream's chunk, read or message boundaries: a match split
// across them is still found, at the cost of holding back a partial match
// (at most the longest pattern less one byte) until the next piece or the
// end; at a message's end the held bytes go, a long enough partial match
// redacted first. What it replaced goes into the audit record
// (secret:reflected), however the body ends.
#pragma once

#include "userspace/proxy/filters/data_filter.h"
#include "userspace/proxy/policy.h"
#include "userspace/proxy/secret_scrubber.h"

namespace zn::proxy::filters {

class ResponseScrubFilter final : public DataFilter {
 public:
  ResponseScrubFilter(const SecretScrubber& scrubber, RequestSummary& summary)
      : scrubber_(scrubber), summary_(summary), stream_(scrubber) {}
  std::string_view name() const override { return "response scrub"; }
  DataResult on_data(std::string_view in, Mark mark, std::string& out) override;
  void on_close() override;

 private:
  const SecretScrubber& scrubber_;
  RequestSummary& summary_;
  SecretScrubber::Stream stream_;
};

// What the scrubber replaced, into the audit record (secret:reflected):
// counts, encodings and identity names, never a value. `head`: in a head
// (or trailer), else in a body.
void note_reflections(RequestSummary& summary, const SecretScrubber& scrubber, const ScrubReport& report,
                      bool head);

}  // namespace zn::proxy::filters
