// A body's bytes as they pass, in order (Envoy's decodeData/encodeData, made
// smaller): the request body streamed behind its head and the response body
// decoded from its framing, or a WebSocket's messages one after another,
// each way. Unlike the head filters, a data filter holds state (what it
// keeps back until it knows it may go), so one is made for each body or
// WebSocket direction (chain.cpp says which, in which order) and ends with
// it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zn::proxy::filters {

// Where the bytes given to a filter end.
enum class Mark {
  kMore,        // more of the same message follows
  kMessageEnd,  // a WebSocket message ends: all of it goes now, but the stream
                // goes on (a match begun here and ended in the next is found)
  kEnd,         // the body ends: everything held back goes, or is found
};

struct DataResult {
  // Non-empty: the labels of the tripwires found. Nothing held goes on and
  // the connection ends (the upstream has part of the body).
  std::vector<std::string> tripwires;
  bool stopped() const { return !tripwires.empty(); }
};

class DataFilter {
 public:
  virtual ~DataFilter() = default;
  virtual std::string_view name() const = 0;
  // The next bytes; what may go on is appended to `out`.
  virtual DataResult on_data(std::string_view in, Mark mark, std::string& out) = 0;
  // The body is over, whole or not (the exchange failed part-way): what the
  // filter saw goes into the audit record.
  virtual void on_close() {}
};

// One body's filters in order: each one's output is the next one's input.
class DataChain {
 public:
  DataChain() = default;
  ~DataChain();
  DataChain(DataChain&&) = default;
  DataChain& operator=(DataChain&&) = default;

  void add(std::unique_ptr<DataFilter> filter) { filters_.push_back(std::move(filter)); }
  bool empty() const { return filters_.empty(); }
  std::vector<std::string_view> names() const;
  // `in` through every filter; what passes the last is appended to `out`
  // (with no filter, `in` itself). Stops at the first filter that stops.
  DataResult run(std::string_view in, Mark mark, std::string& out);
  DataResult run(std::string_view in, bool end, std::string& out) {
    return run(in, end ? Mark::kEnd : Mark::kMore, out);
  }
  // Every filter's on_close, once.
  void close();

 private:
  std::vector<std::unique_ptr<DataFilter>> filters_;
  // Between two filters (the bytes may not be clean yet: wiped at the end).
  std::string between_[2];
  bool closed_ = false;
};

}  // namespace zn::proxy::filters
