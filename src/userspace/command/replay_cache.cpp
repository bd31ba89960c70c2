#include "userspace/command/replay_cache.h"

namespace zn::command {

Rejection ReplayCache::admit(const EnvelopeHeader& header, const std::string& own_session,
                             std::chrono::system_clock::time_point now, std::chrono::milliseconds window) {
  if (header.session != own_session) return Rejection::kWrongSession;
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  if (header.issued_ms < now_ms - window.count()) return Rejection::kStale;
  if (header.issued_ms > now_ms + window.count()) return Rejection::kFuture;
  const std::string nonce(reinterpret_cast<const char*>(header.nonce.data()), header.nonce.size());
  if (seen_.count(nonce)) return Rejection::kReplayed;
  // What is older than the window is refused as stale whatever its nonce.
  std::erase_if(seen_, [&](const auto& kv) { return kv.second < now_ms - window.count(); });
  if (seen_.size() >= capacity_) return Rejection::kReplayCacheFull;
  seen_.emplace(nonce, header.issued_ms);
  return Rejection::kNone;
}

}  // namespace zn::command
