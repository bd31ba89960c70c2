#include "userspace/proxy/filters/response_scrub_filter.h"

#include <algorithm>

namespace zn::proxy::filters {
namespace {

void add_once(std::vector<std::string>& to, const std::string& value) {
  if (std::find(to.begin(), to.end(), value) == to.end()) to.push_back(value);
}

}  // namespace

DataResult ResponseScrubFilter::on_data(std::string_view in, Mark mark, std::string& out) {
  stream_.feed(in, out);
  if (mark == Mark::kMessageEnd) stream_.end_message(out);
  if (mark == Mark::kEnd) stream_.finish(out);
  return {};
}

void ResponseScrubFilter::on_close() { note_reflections(summary_, scrubber_, stream_.report(), false); }

void note_reflections(RequestSummary& summary, const SecretScrubber& scrubber, const ScrubReport& report,
                      bool head) {
  if (report.matches == 0) return;
  (head ? summary.reflected_in_head : summary.reflected_in_body) += report.matches;
  for (const std::string& e : report.encoding_names()) add_once(summary.reflected_encodings, e);
  for (size_t i = 0; i < scrubber.secret_count(); ++i)
    if (report.secrets >> i & 1) add_once(summary.reflected_identities, scrubber.label(i));
}

}  // namespace zn::proxy::filters
