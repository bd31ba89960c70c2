// What the filter tests share: the fake broker (fake_policy.h), a connection's
// state, and requests parsed from the bytes a guest would send. No sockets,
// no loop.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "userspace/http/message.h"
#include "userspace/proxy/filters/filter.h"
#include "../fake_policy.h"

namespace zn::proxy::filters {

// One guest connection (intercepted TLS to api.example.test:443) and the
// requests on it.
class FilterTest : public ::testing::Test {
 protected:
  FilterTest() {
    facts.mode = ConnectionMode::kIntercept;
    facts.session = "user-1";
    facts.host = "api.example.test";
    facts.tls = true;
    facts.port = 443;
  }

  // A request as the guest sent it (head and anything after), parsed as
  // the exchange parses it; the bytes are kept (the filters read them).
  Request& request(std::string bytes) {
    inputs.push_back(std::make_unique<std::string>(std::move(bytes)));
    heads.push_back(std::make_unique<http::RequestHead>());
    summaries.push_back(std::make_unique<RequestSummary>());
    const http::ParseResult r = http::parse_request_head(*inputs.back(), http::HttpLimits{}, *heads.back());
    EXPECT_EQ(r.state, http::ParseState::kDone) << r.error;
    requests.push_back(
        std::make_unique<Request>(*heads.back(), *inputs.back(), r.consumed, *summaries.back()));
    return *requests.back();
  }
  Request& get(const std::string& target, const std::string& fields = "") {
    return request("GET " + target + " HTTP/1.1\r\nHost: api.example.test\r\n" + fields + "\r\n");
  }

  UpstreamDecision facts;
  FakePolicy policy;
  InterceptCounters counters;
  SecretScrubber scrubber;
  RequestScreen screen;
  Connection connection{facts, policy, counters, scrubber, screen};

 private:
  std::vector<std::unique_ptr<std::string>> inputs;
  std::vector<std::unique_ptr<http::RequestHead>> heads;
  std::vector<std::unique_ptr<RequestSummary>> summaries;
  std::vector<std::unique_ptr<Request>> requests;
};

// A well-formed placeholder (zn_ph_ and 32 base32 characters), as the broker mints them.
inline const std::string kPlaceholder = "zn_ph_abcdefghijklmnopqrstuvwxyz234567";

inline bool continues(const FilterResult& r) { return r.kind == FilterResult::Kind::kContinue; }

}  // namespace zn::proxy::filters
