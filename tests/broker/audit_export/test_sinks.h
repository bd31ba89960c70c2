// Sinks for the exporter's unit tests (a fake of one layer: the network
// sinks have their own tests against real receivers): one that keeps what
// it is given and can be told to fail.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "broker/audit_export/sink.h"

namespace zn::broker::audit_export::test {

struct SinkTape {
  std::mutex mu;
  std::vector<std::string> lines;  // every delivered line, seals included, in order
  std::atomic<int> fail_next{0};   // fail this many deliveries
  std::atomic<bool> down{false};   // fail every delivery while set
  std::atomic<int> attempts{0};
  std::atomic<int> retry_after_ms{0};

  std::vector<std::string> snapshot() {
    std::lock_guard lk(mu);
    return lines;
  }
};

class TapeSink : public AuditSink {
 public:
  explicit TapeSink(SinkTape& tape) : tape_(tape) {}
  void deliver(const ExportBatch& b) override {
    ++tape_.attempts;
    if (tape_.down || tape_.fail_next > 0) {
      if (tape_.fail_next > 0) --tape_.fail_next;
      const int ra = tape_.retry_after_ms;
      throw SinkError("tape: down", ra ? std::optional(std::chrono::milliseconds(ra)) : std::nullopt);
    }
    std::lock_guard lk(tape_.mu);
    for (const std::string& l : b.lines) tape_.lines.push_back(l);
    tape_.lines.push_back(b.seal_line);
  }

 private:
  SinkTape& tape_;
};

}  // namespace zn::broker::audit_export::test
