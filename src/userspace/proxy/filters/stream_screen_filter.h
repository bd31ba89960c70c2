// The request body streamed behind its head (one too long for the body
// screen to read whole) screened as it goes: a window is kept back so that
// no tripwire, however escaped or split across reads, goes before it is
// seen. A hit stops the body; the exchange raises the alarm and ends the
// connection (the upstream has the head and part of the body, never the
// tripwire).
#pragma once

#include <vector>

#include "userspace/proxy/filters/data_filter.h"
#include "userspace/proxy/request_screen.h"

namespace zn::proxy::filters {

class StreamScreenFilter final : public DataFilter {
 public:
  // `exempt`: the request's own placeholders (labels only are kept).
  StreamScreenFilter(const RequestScreen& screen, const std::vector<Substitution>& exempt)
      : stream_(screen, exempt) {}
  std::string_view name() const override { return "request body screen (streamed)"; }
  DataResult on_data(std::string_view in, bool end, std::string& out) override;

 private:
  StreamScreen stream_;
};

}  // namespace zn::proxy::filters
