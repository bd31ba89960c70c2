#include "userspace/proxy/filters/stream_screen_filter.h"

namespace zn::proxy::filters {

DataResult StreamScreenFilter::on_data(std::string_view in, bool end, std::string& out) {
  DataResult r;
  r.tripwires = stream_.feed(in, out);
  if (!r.stopped() && end) r.tripwires = stream_.finish(out);
  return r;
}

}  // namespace zn::proxy::filters
