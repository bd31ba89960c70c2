#include "broker/session/capability_service.h"

#include <asio/post.hpp>
#include <sodium.h>

#include "broker/policy/parser.h"

namespace zn::broker {

proxy::LocalResponse capability_error(int status, std::string_view code, std::string_view message) {
  return {status, "application/json", gateway_error_body(code, message)};
}

CapabilityService::CapabilityService(AuditLog& audit, std::shared_ptr<StoreSet> stores, size_t threads,
                                     size_t max_pending)
    : audit_(audit),
      stores_(std::move(stores)),
      gateway_(*stores_),
      max_pending_(max_pending),
      pool_(threads) {}

void CapabilityService::check(const Policy& policy) const {
  for (const auto& [name, cap] : policy.caps)
    if (auto why = stores_->missing(cap))
      throw PolicyError("$.caps." + name + (cap.kind == CapabilityKind::kSql ? ".db" : ".store"), *why);
}

void CapabilityService::release(const Session& before, const Session* after) {
  const Policy& p = before.policy->policy();
  for (const auto& [name, handle] : before.record.cap_handles) {
    if (after) {
      auto kept = after->record.cap_handles.find(name);
      if (kept != after->record.cap_handles.end() && kept->second == handle) continue;
    }
    auto cap = p.caps.find(name);
    if (cap == p.caps.end()) continue;
    if (cap->second.kind != CapabilityKind::kKv && cap->second.kind != CapabilityKind::kQueue) continue;
    StoreStatus erased = stores_->forget(cap->second.kind, cap->second.store, capability_store_id(handle));
    if (!erased.ok())
      audit_.post({"resource:deny",
                   before.record.id,
                   {{"cap", name}, {"op", "release"}, {"code", to_string(erased.error())}}});
  }
}

CapabilityService::~CapabilityService() { shutdown(); }

void CapabilityService::shutdown() {
  {
    std::lock_guard lock(post_mu_);
    stopped_ = true;
  }
  pool_.join();
}

std::optional<BoundCapability> CapabilityService::bound(const Session& s, std::string_view handle) {
  const Policy& p = s.policy->policy();
  std::optional<BoundCapability> found;
  // Every handle is compared in full, so the time taken says nothing of how
  // much of a guess matched or which capability it was.
  for (const auto& [name, held] : s.record.cap_handles) {
    if (held.size() != handle.size()) continue;
    if (sodium_memcmp(held.data(), handle.data(), held.size()) != 0) continue;
    auto cap = p.caps.find(name);
    if (cap == p.caps.end()) continue;  // dropped from the policy: the handle died with it
    found = BoundCapability{name, cap->second, capability_store_id(held)};
  }
  return found;
}

proxy::LocalResponse CapabilityService::answer(const Session& s, const proxy::LocalRequest& request) {
  GatewayRequest req{request.method, request.target, request.body};
  GatewayResponse r = gateway_.serve(req, [&s](std::string_view handle) { return bound(s, handle); });
  if (!r.event.empty()) audit_.post({r.event, s.record.id, std::move(r.detail)});
  return {r.status, std::move(r.content_type), std::move(r.body)};
}

void CapabilityService::serve(SessionPtr session, proxy::LocalRequest request,
                              std::function<void(proxy::LocalResponse)> done) {
  if (pending_.fetch_add(1) >= max_pending_) {
    pending_.fetch_sub(1);
    audit_.post({"resource:deny", session->record.id, {{"status", 503}, {"code", "busy"}}});
    done(capability_error(503, "busy", "too many requests in progress"));
    return;
  }
  std::unique_lock lock(post_mu_);
  if (stopped_) {
    lock.unlock();
    pending_.fetch_sub(1);
    done(capability_error(503, "unavailable", "zerod is stopping"));
    return;
  }
  asio::post(pool_, [this, session = std::move(session), request = std::move(request),
                     done = std::move(done)]() mutable {
    proxy::LocalResponse r;
    try {
      r = answer(*session, request);
    } catch (const std::exception&) {
      r = capability_error(500, "internal", "the request failed");
    }
    pending_.fetch_sub(1);
    done(std::move(r));
  });
}

}  // namespace zn::broker
