// The broker of the proxy's unit tests: verdicts each test sets, every call
// recorded (the exchange's tests and the filters' share it). Thread-safe: the
// exchange asks it from its loop and its pool.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "userspace/net/address.h"
#include "userspace/proxy/policy.h"

namespace zn::proxy {

class FakePolicy : public ProxyPolicy {
 public:
  // Default: allowed under rule 0 (no identity), to the Host as sent.
  std::function<RequestDecision(const RequestFacts&)> verdict = [](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.status = 0;
    d.host = f.host_header;
    d.rule = RuleRef{0, ""};
    return d;
  };
  std::optional<Injection> injection;
  std::vector<ScrubSecret> secrets;
  HoldState hold{HoldOutcome::kApproved, ""};
  std::vector<net::IpAddress> upstream{*net::IpAddress::parse("127.0.0.1")};

  UpstreamDecision decide(const ConnectionFacts&) override { return {}; }
  // An allowed first request of a connection gets `secrets`, as the
  // broker's contract says, unless the verdict sets its own.
  RequestDecision decide_request(const RequestFacts& facts) override {
    std::lock_guard lock(mu_);
    requests.push_back(facts);
    RequestDecision d = verdict(facts);
    if (facts.want_session_secrets && d.allow && d.session_secrets.empty()) d.session_secrets = secrets;
    return d;
  }
  HoldState hold_state(const std::string&, uint64_t ticket) override {
    std::lock_guard lock(mu_);
    polled.push_back(ticket);
    return hold;
  }
  void set_hold(HoldState h) {
    std::lock_guard lock(mu_);
    hold = std::move(h);
  }
  // Unset: wakes at once (the ticket is decided already).
  std::function<void(uint64_t, std::function<void()>)> on_watch;
  void watch_hold(uint64_t ticket, std::function<void()> wake) override {
    if (on_watch)
      on_watch(ticket, std::move(wake));
    else
      wake();
  }
  UpstreamAddresses resolve_upstream(const std::string&, const std::string& host) override {
    std::lock_guard lock(mu_);
    resolved.push_back(host);
    return {upstream, upstream.empty() ? "no upstream" : ""};
  }
  std::optional<Injection> injection_for(const std::string&, const RuleRef& rule) override {
    std::lock_guard lock(mu_);
    injected.push_back(rule.identity);
    return injection;
  }
  void on_request_done(const RequestSummary& summary) override {
    std::lock_guard lock(mu_);
    summaries.push_back(summary);
  }
  void on_closed(const ConnectionSummary&) override {}

  std::vector<RequestFacts> requests;
  std::vector<uint64_t> polled;
  std::vector<std::string> resolved, injected;
  std::vector<RequestSummary> summaries;

 private:
  std::mutex mu_;
};

}  // namespace zn::proxy
