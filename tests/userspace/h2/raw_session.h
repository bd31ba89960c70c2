// A server session under test fed raw, hand-built frames, with a clock the
// test steps: what it wrote back (as frames) and the events it raised.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "raw_frames.h"
#include "session_fixture.h"

namespace zn::h2::test {

inline constexpr uint32_t kEnhanceYourCalm = 0xb, kFlowControlError = 0x3, kProtocolError = 0x1,
                          kFrameSizeError = 0x6, kRefusedStream = 0x7, kCancel = 0x8;

class RawSessionTest : public ::testing::Test {
 protected:
  void start(H2Limits limits = {}) {
    ServerOptions options;
    options.limits = limits;
    options.clock = [this] { return now_; };
    server_ = std::make_unique<H2ServerSession>(options);
    server_->take_output();  // our SETTINGS
  }
  // The client's preface and SETTINGS, and (ack) the ACK of ours.
  Result open(bool ack = true) {
    if (!server_) start();
    return send(client_preface() + settings() + (ack ? settings_ack() : ""));
  }
  Result send(const std::string& bytes) {
    Result r = server_->feed(bytes_of(bytes));
    for (auto& e : server_->take_events()) events_.push_back(std::move(e));
    out_ += server_->take_output();
    for (auto& e : server_->take_events()) events_.push_back(std::move(e));
    return r;
  }
  std::vector<Frame> frames() { return parse_frames(out_); }
  std::vector<LimitTripped> trips() { return of<LimitTripped>(events_); }
  // Tripped on the connection: GOAWAY with `code`, one event, the counter.
  void expect_connection_tripped(const Result& r, Limit limit, uint32_t code) {
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find(std::string(limit_name(limit))), std::string::npos) << r.error;
    EXPECT_EQ(goaway_code(frames()), int64_t{code});
    ASSERT_EQ(trips().size(), 1u);
    EXPECT_EQ(trips()[0].limit, limit);
    EXPECT_EQ(trips()[0].stream_id, 0);
    EXPECT_EQ(server_->counters().at(limit), 1u);
    EXPECT_FALSE(server_->feed(bytes_of(ping())).ok) << "a tripped session stays failed";
  }
  // A protocol error: GOAWAY with `code`, feed() failing, no limit
  // counted (it is the RFC's answer, not a flood).
  void expect_connection_error(const Result& r, uint32_t code) {
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(goaway_code(frames()), int64_t{code}) << r.error;
    EXPECT_TRUE(trips().empty());
    EXPECT_FALSE(server_->feed(bytes_of(ping())).ok) << "a failed session stays failed";
  }
  // Answers the request on `stream_id` (200, no body), which closes the
  // stream once the client has ended it.
  void answer(uint32_t stream_id) {
    ASSERT_TRUE(server_->submit_response(static_cast<int32_t>(stream_id), 200, {}, false));
    out_ += server_->take_output();
    for (auto& e : server_->take_events()) events_.push_back(std::move(e));
  }
  void expect_untouched(const Result& r) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(goaway_code(frames()), -1);
    EXPECT_TRUE(trips().empty());
  }
  std::string open_streams(uint32_t first, int count, bool reset) {
    std::string bytes;
    for (int i = 0; i < count; ++i) {
      const uint32_t id = first + 2 * i;
      bytes += headers(id, get_block(), kEndHeaders);
      if (reset) bytes += rst_stream(id, kCancel);
    }
    return bytes;
  }

  std::chrono::steady_clock::time_point now_{std::chrono::seconds(1000)};
  std::unique_ptr<H2ServerSession> server_;
  std::vector<ServerEvent> events_;
  std::string out_;
};

inline std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace zn::h2::test
