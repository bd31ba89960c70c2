// The approval webhook: each request held for approval is POSTed as JSON to
// the operator's URL (zerod's "approval_webhook" config), so a human hears
// of it without watching `znctl approval watch`.
//
// Trust: the body is signed. X-Zeroness-Signature: t=<unix seconds>,
// v1=<hex HMAC-SHA256 under the shared 32-byte key>, ed25519=<hex detached
// Ed25519 signature under zerod's webhook key>, each over "<t>.<body>" (the
// parts configured). A receiver checks one, and that t is recent (replay).
// The body is what approval.watch shows: header names and the redacted
// preview, never a secret.
//
// Never in the way: enqueue() only queues (a short lock, a bounded queue
// that drops its oldest notice when full, counted and logged), from any
// thread, a proxy I/O loop included. One notifier thread POSTs (libcurl,
// http or https, a timeout per attempt, a few attempts with backoff). A
// failed webhook decides nothing: the request stays held until an operator
// answers or its ticket expires.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "broker/daemon/config.h"
#include "broker/identity/signing_key.h"
#include "broker/secrets/host_key.h"

namespace zn::broker {

class ApprovalWebhook {
 public:
  struct Options {
    std::string url;
    std::optional<HostKey> hmac_key;                // 32 bytes in guarded pages
    std::shared_ptr<const SigningKey> signing_key;  // Ed25519
    std::chrono::milliseconds timeout{5000};        // per attempt
    int attempts = 3;
    std::chrono::milliseconds backoff{250};  // before the 2nd attempt, doubled for each next
    size_t queue_limit = 256;
  };
  struct Stats {
    uint64_t sent = 0, failed = 0, dropped = 0, attempts = 0;
  };

  // The options of `config`: the HMAC key loaded (refused unless it is a
  // regular 0600 file of 32 bytes owned by us; never any key bytes in the
  // error), the Ed25519 key loaded or made at `signing_key_path`. Throws
  // std::runtime_error. Main thread, at start.
  static Options options_for(const ApprovalWebhookConfig& config, const std::string& signing_key_path);

  // Starts the notifier thread.
  explicit ApprovalWebhook(Options options);
  ~ApprovalWebhook();  // stop()
  ApprovalWebhook(const ApprovalWebhook&) = delete;
  ApprovalWebhook& operator=(const ApprovalWebhook&) = delete;

  // Queues one notice. Never blocks on the network; any thread.
  void enqueue(nlohmann::json notice);
  // Ends the thread: an attempt in flight is abandoned, queued notices are
  // dropped. Idempotent.
  void stop();
  Stats stats() const;
  // The Ed25519 public key (null without one).
  std::shared_ptr<const SigningKey> signing_key() const { return options_.signing_key; }

  // The X-Zeroness-Signature value for `body` sent at unix time `t`. Any thread.
  std::string signature(int64_t t, std::string_view body) const;

 private:
  void run();
  bool post(const std::string& body, const std::string& event);  // one attempt
  void count_and_log(const char* what, uint64_t n) const;

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> queue_;
  Stats stats_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace zn::broker
