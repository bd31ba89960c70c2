#include "broker/session/capability_service.h"

#include <sodium.h>

#include <algorithm>

#include "broker/policy/parser.h"
#include "broker/resources/gateway_route.h"

namespace zn::broker {

namespace {

bool same_terms(const Capability& a, const Capability& b) {
  return a.kind == b.kind && a.read_only == b.read_only && a.store == b.store;
}

// At least one, and at most all threads but one (another always has one).
size_t share_of(size_t threads, size_t wanted) {
  return std::max<size_t>(1, std::min(wanted, threads > 1 ? threads - 1 : 1));
}

}  // namespace

proxy::LocalResponse capability_error(int status, std::string_view code, std::string_view message) {
  return {status, "application/json", gateway_error_body(code, message)};
}

CapabilityService::CapabilityService(AuditLog& audit, std::shared_ptr<StoreSet> stores, size_t threads,
                                     size_t max_pending, size_t per_store, size_t per_session)
    : audit_(audit),
      stores_(std::move(stores)),
      gateway_(*stores_),
      pool_(FairLimits{.slots = std::max<size_t>(1, threads),
                       .per_tenant = share_of(threads, per_session),
                       .per_lane = share_of(threads, per_store),
                       .queued = max_pending},
            "zn-capability") {}

void CapabilityService::check(const Policy& policy) const {
  for (const auto& [name, cap] : policy.caps)
    if (auto why = stores_->missing(cap))
      throw PolicyError("$.caps." + name + (cap.kind == CapabilityKind::kSql ? ".db" : ".store"), *why);
}

void CapabilityService::release(const Session& before, const Session* after) {
  const Policy& p = before.policy->policy();
  // First the calls: a capability gone, or held on other terms (another
  // store, read-only now), has its running calls cancelled or finished.
  std::set<std::string> revoked;
  for (const auto& [name, handle] : before.record.cap_handles) {
    bool same = false;
    if (after) {
      auto kept = after->record.cap_handles.find(name);
      auto was = p.caps.find(name);
      auto now = after->policy->policy().caps.find(name);
      same = kept != after->record.cap_handles.end() && kept->second == handle && was != p.caps.end() &&
             now != after->policy->policy().caps.end() && same_terms(was->second, now->second);
    }
    if (!same) revoked.insert(handle);
  }
  revoke(before.record.id, revoked);

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

void CapabilityService::revoke(const std::string& session, const std::set<std::string>& handles) {
  if (handles.empty()) return;
  auto matches = [&](const Running* r) { return r->session == session && handles.contains(r->handle); };
  std::unique_lock lock(running_mu_);
  for (Running* r : running_)
    if (matches(r)) r->cancelled = true;
  running_cv_.wait(lock, [&] { return std::none_of(running_.begin(), running_.end(), matches); });
}

CapabilityService::~CapabilityService() { shutdown(); }

void CapabilityService::shutdown() { pool_.stop(); }

CapabilityCallCounts CapabilityService::counts() const {
  const FairPool::Counts c = pool_.counts();
  return CapabilityCallCounts{c.waiting, c.running};
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

std::string CapabilityService::lane_of(const Session& s, const proxy::LocalRequest& request) {
  const GatewayRoute where = parse_gateway_route(request.target);
  if (!where.matched || !well_formed_handle(where.handle)) return "";
  const std::optional<BoundCapability> cap = bound(s, where.handle);
  if (!cap) return "";
  return std::string(capability_kind_name(cap->capability.kind)) + "/" + cap->capability.store;
}

proxy::LocalResponse CapabilityService::answer(const Session& queued, const proxy::LocalRequest& request) {
  // Registered before the session is looked up, so that a release() either
  // sees this call (and waits for it) or the call sees the session release()
  // was called for (published before it) and finds its handle gone.
  Running run;
  run.session = queued.record.id;
  bool registered = false, revoked = false;
  struct Unregister {
    CapabilityService& service;
    Running& run;
    bool& registered;
    ~Unregister() {
      if (!registered) return;
      {
        std::lock_guard lock(service.running_mu_);
        service.running_.remove(&run);
      }
      service.running_cv_.notify_all();
    }
  } unregister{*this, run, registered};

  auto find = [&](std::string_view handle) -> std::optional<BoundCapability> {
    if (!registered) {
      run.handle = std::string(handle);
      std::lock_guard lock(running_mu_);
      running_.push_back(&run);
      registered = true;
    }
    const SessionPtr now = current_ ? current_(queued.record.id) : nullptr;
    const Session* s = current_ ? now.get() : &queued;
    std::optional<BoundCapability> found = s ? bound(*s, handle) : std::nullopt;
    // Known when the call was queued, gone now.
    if (!found) revoked = bound(queued, handle).has_value();
    return found;
  };
  GatewayRequest req{request.method, request.target, request.body, &run.cancelled};
  GatewayResponse r = gateway_.serve(req, find);
  if (revoked && r.event == "resource:deny") r.detail["reason"] = "revoked";
  if (!r.event.empty()) audit_.post({r.event, queued.record.id, std::move(r.detail)});
  return {r.status, std::move(r.content_type), std::move(r.body)};
}

void CapabilityService::serve(SessionPtr session, proxy::LocalRequest request,
                              std::function<void(proxy::LocalResponse)> done) {
  const std::string lane = lane_of(*session, request);
  const std::string id = session->record.id;
  // One owner for the call's state, shared by the two ways it can end (run
  // or refused), exactly one of which happens.
  struct Call {
    SessionPtr session;
    proxy::LocalRequest request;
    std::function<void(proxy::LocalResponse)> done;
  };
  auto call = std::make_shared<Call>(Call{std::move(session), std::move(request), std::move(done)});
  FairPool::Job job;
  job.run = [this, call] {
    proxy::LocalResponse r;
    try {
      r = answer(*call->session, call->request);
    } catch (const std::exception&) {
      r = capability_error(500, "internal", "the request failed");
    }
    call->done(std::move(r));
  };
  job.refused = [this, call] {
    // Refused while full (this session had the most waiting) or stopping.
    audit_.post({"resource:deny", call->session->record.id, {{"status", 503}, {"code", "busy"}}});
    call->done(capability_error(503, "busy", "too many requests in progress"));
  };
  pool_.post(id, lane, std::move(job));
}

}  // namespace zn::broker
