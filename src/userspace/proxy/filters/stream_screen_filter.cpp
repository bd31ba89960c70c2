#include "userspace/proxy/filters/stream_screen_filter.h"

namespace zn::proxy::filters {

DataResult StreamScreenFilter::on_data(std::string_view in, Mark mark, std::string& out) {
  DataResult r;
  r.tripwires = stream_.feed(in, out);
  if (r.stopped()) return r;
  if (mark == Mark::kMessageEnd) r.tripwires = stream_.end_message(out);
  if (mark == Mark::kEnd) r.tripwires = stream_.finish(out);
  return r;
}

}  // namespace zn::proxy::filters
