// What the guest sends behind a head the chain let through, screened as it
// goes: a request body streamed behind its head (one too long for the body
// screen to read whole), or a WebSocket's messages up. A window is kept back
// so that no tripwire, however escaped or split across reads or messages,
// goes before it is seen. A hit stops it; the exchange raises the alarm and
// ends the connection (the upstream has the head and part of the body, or
// the messages before, never the tripwire).
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
  std::string_view name() const override { return "stream screen"; }
  DataResult on_data(std::string_view in, Mark mark, std::string& out) override;

 private:
  StreamScreen stream_;
};

}  // namespace zn::proxy::filters
