// The order of the request path, declared once (chain.cpp): a newcomer
// learns the path from that table. The exchange (intercept.cpp) runs the
// head chain after parsing a request's head and before anything goes
// upstream, does the I/O a filter stops for, then resumes the chain at that
// filter; after the upstream's head, the response chain.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "userspace/proxy/filters/data_filter.h"
#include "userspace/proxy/filters/filter.h"
#include "userspace/proxy/filters/response_rules_filter.h"

namespace zn::proxy::filters {

struct ChainStop {
  FilterResult result;  // kContinue: every filter went on
  size_t at = 0;        // the filter that stopped: run again from here after its I/O
};

class HeadChain {
 public:
  explicit HeadChain(std::span<const HeadFilter* const> filters) : filters_(filters) {}
  ChainStop run(Request& request, Connection& connection, size_t from = 0) const;
  std::span<const HeadFilter* const> filters() const { return filters_; }

 private:
  std::span<const HeadFilter* const> filters_;
};

class ResponseChain {
 public:
  explicit ResponseChain(std::span<const ResponseHeadFilter* const> filters) : filters_(filters) {}
  FilterResult run(const http::ResponseHead& response, Connection& connection) const;
  std::span<const ResponseHeadFilter* const> filters() const { return filters_; }

 private:
  std::span<const ResponseHeadFilter* const> filters_;
};

// The proxy's chains, in their declared order (stateless: shared by every
// connection on every thread).
const HeadChain& head_chain();
const ResponseChain& response_chain();

// The data chains, made for one body or WebSocket direction each (their
// filters hold what they keep back). The guest's: a request body streamed
// behind its head, or a WebSocket's messages up (`exempt`: the request's
// own placeholders, going to their host). The upstream's: a response body,
// or a WebSocket's messages down (what they replaced goes into `summary`).
DataChain guest_data_chain(const std::vector<Substitution>& exempt, Connection& connection);
DataChain upstream_data_chain(Connection& connection, RequestSummary& summary);

}  // namespace zn::proxy::filters
