#include "broker/daemon/audit_retention.h"

#include <spdlog/spdlog.h>

#include "broker/audit_export/batch_seal.h"
#include "broker/policy/parser.h"

namespace zn::broker {

namespace {

uint64_t field(const nlohmann::json& j, const char* key, uint64_t max) {
  if (!j.contains(key)) return 0;
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<uint64_t>() > max)
    throw PolicyError(std::string("$.audit_retention.") + key,
                      "must be an integer 1.." + std::to_string(max));
  return v.get<uint64_t>();
}

}  // namespace

AuditRetentionOptions parse_audit_retention(const nlohmann::json& j) {
  if (!j.is_object()) throw PolicyError("$.audit_retention", "must be an object");
  for (const auto& [k, v] : j.items()) {
    (void)v;
    if (k != "max_age_days" && k != "max_records" && k != "interval_s")
      throw PolicyError("$.audit_retention." + k, "unknown field");
  }
  AuditRetentionOptions o;
  o.max_age = std::chrono::seconds(field(j, "max_age_days", 36500) * 86400);
  o.max_records = field(j, "max_records", 1'000'000'000'000ull);
  if (j.contains("interval_s")) o.interval = std::chrono::seconds(field(j, "interval_s", 86400));
  if (o.max_age.count() == 0 && o.max_records == 0)
    throw PolicyError("$.audit_retention", "needs max_age_days or max_records");
  return o;
}

AuditRetention::AuditRetention(AuditRetentionOptions options, AuditLog& audit,
                               std::shared_ptr<const SigningKey> key)
    : options_(options), audit_(audit), key_(std::move(key)) {
  if ((options_.max_age.count() == 0 && options_.max_records == 0) || !options_.background) return;
  thread_ = std::thread([this] {
    std::unique_lock lk(mu_);
    while (!stop_) {
      lk.unlock();
      try {
        run_once();
      } catch (const std::exception& e) {
        spdlog::error("audit retention: {}", e.what());
      }
      lk.lock();
      cv_.wait_for(lk, options_.interval, [this] { return stop_; });
    }
  });
}

AuditRetention::~AuditRetention() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t AuditRetention::run_once() {
  std::lock_guard pass(pass_mu_);
  const std::string cutoff = options_.max_age.count()
                                 ? format_audit_ts(std::chrono::system_clock::now() - options_.max_age)
                                 : std::string();
  uint64_t deleted = 0, through = 0;
  std::string through_hash;
  while (true) {
    const AuditLog::RetentionView first = audit_.retention_view("", 0);
    if (first.first == 0 || first.first >= first.head)
      break;  // keep the head record: the chain continues from it
    uint64_t target = 0;
    if (options_.max_records && first.head - first.first + 1 > options_.max_records)
      target = first.head - options_.max_records;
    const uint64_t chunk_end = std::min(first.first + options_.chunk - 1, first.head - 1);
    if (!cutoff.empty()) target = std::max(target, audit_.retention_view(cutoff, chunk_end).last_before);
    target = std::min(target, chunk_end);
    if (target < first.first) break;
    deleted += audit_.prune_through(target, [this](uint64_t seq, const std::string& hash) {
      return audit_export::sign_audit_checkpoint(*key_, seq, hash);
    });
    through = target;
    if (const auto cp = audit_.checkpoint()) through_hash = cp->hash;
  }
  if (deleted) {
    spdlog::info("audit retention: deleted {} records through seq {}", deleted, through);
    audit_.post(
        {"audit:pruned", "", {{"through", through}, {"count", deleted}, {"checkpoint_hash", through_hash}}});
  }
  return deleted;
}

}  // namespace zn::broker
