#include "broker/daemon/approval_webhook.h"

#include <curl/curl.h>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <stdexcept>

namespace zn::broker {
namespace {

std::string to_hex(const unsigned char* bytes, size_t n) {
  std::string hex(n * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), bytes, n);
  hex.resize(n * 2);
  return hex;
}

size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

// Aborts a transfer in flight when zerod stops.
int abort_when_stopping(void* stopping, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(stopping)->load() ? 1 : 0;
}

bool is_power_of_ten(uint64_t n) {
  while (n >= 10 && n % 10 == 0) n /= 10;
  return n == 1;
}

}  // namespace

ApprovalWebhook::Options ApprovalWebhook::options_for(const ApprovalWebhookConfig& config,
                                                      const std::string& signing_key_path) {
  Options o;
  o.url = config.url;
  o.timeout = std::chrono::milliseconds(config.timeout_ms);
  // HostKey's checks are what a webhook key needs too: a regular file, ours,
  // 0600, exactly 32 bytes, read into guarded pages.
  if (!config.hmac_key_file.empty()) o.hmac_key = HostKey::load(config.hmac_key_file);
  if (config.ed25519) {
    // 32 random bytes made on the first start (0600), the Ed25519 seed.
    const HostKey seed = HostKey::load_or_create(signing_key_path);
    o.signing_key = seed.with_key([](std::span<const unsigned char> s) { return SigningKey::from_seed(s); });
  }
  if (!o.hmac_key && !o.signing_key) throw std::runtime_error("approval webhook: no signature configured");
  return o;
}

ApprovalWebhook::ApprovalWebhook(Options options) : options_(std::move(options)) {
  static std::once_flag curl_ready;
  std::call_once(curl_ready, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("libcurl cannot start");
  });
  thread_ = std::thread([this] { run(); });
}

ApprovalWebhook::~ApprovalWebhook() { stop(); }

void ApprovalWebhook::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ApprovalWebhook::Stats ApprovalWebhook::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ApprovalWebhook::count_and_log(const char* what, uint64_t n) const {
  // Logged at the 1st, 10th, 100th...: a dead receiver is reported, never per notice.
  if (is_power_of_ten(n)) spdlog::warn("approval webhook: {} {} notice(s) so far", what, n);
}

void ApprovalWebhook::enqueue(nlohmann::json notice) {
  uint64_t dropped = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (queue_.size() >= options_.queue_limit) {
      queue_.pop_front();  // the oldest: the newest ticket is the one still waiting longest
      dropped = ++stats_.dropped;
    }
    queue_.push_back(std::move(notice));
  }
  cv_.notify_one();
  if (dropped) count_and_log("queue full, dropped", dropped);
}

std::string ApprovalWebhook::signature(int64_t t, std::string_view body) const {
  const std::string message = std::to_string(t) + "." + std::string(body);
  std::string out = "t=" + std::to_string(t);
  if (options_.hmac_key) {
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    options_.hmac_key->with_key([&](std::span<const unsigned char> key) {
      crypto_auth_hmacsha256_state st;
      crypto_auth_hmacsha256_init(&st, key.data(), key.size());
      crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(message.data()),
                                    message.size());
      crypto_auth_hmacsha256_final(&st, mac);
      sodium_memzero(&st, sizeof st);
    });
    out += ",v1=" + to_hex(mac, sizeof mac);
  }
  if (options_.signing_key) {
    const SigningKey::Signature sig = options_.signing_key->sign(message);
    out += ",ed25519=" + to_hex(sig.data(), sig.size());
  }
  return out;
}

bool ApprovalWebhook::post(const std::string& body, const std::string& event) {
  CURL* c = curl_easy_init();
  if (!c) return false;
  const int64_t t =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::string sig = "X-Zeroness-Signature: " + signature(t, body);
  const std::string ev = "X-Zeroness-Event: approval." + event;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, sig.c_str());
  headers = curl_slist_append(headers, ev.c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(c, CURLOPT_URL, options_.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_when_stopping);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &stopping_);
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return rc == CURLE_OK && status >= 200 && status < 300;
}

void ApprovalWebhook::run() {
  while (true) {
    nlohmann::json notice;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      notice = std::move(queue_.front());
      queue_.pop_front();
    }
    const std::string body = notice.dump();
    const std::string event = notice.value("event", "held");
    bool sent = false;
    std::chrono::milliseconds wait = options_.backoff;
    for (int attempt = 0; attempt < options_.attempts && !sent && !stopping_; ++attempt) {
      if (attempt > 0) {
        std::unique_lock lock(mu_);
        if (cv_.wait_for(lock, wait, [&] { return stopping_.load(); })) return;
        wait *= 2;
      }
      {
        std::lock_guard lock(mu_);
        ++stats_.attempts;
      }
      sent = post(body, event);
    }
    uint64_t failed = 0;
    {
      std::lock_guard lock(mu_);
      if (sent)
        ++stats_.sent;
      else
        failed = ++stats_.failed;
    }
    if (failed) count_and_log("could not deliver", failed);
  }
}

}  // namespace zn::broker
