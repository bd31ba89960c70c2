#include "broker/session/capability_service.h"

#include <asio/post.hpp>
#include <sodium.h>

#include <algorithm>

#include "broker/policy/parser.h"
#include "broker/resources/gateway_route.h"

namespace zn::broker {

namespace {

bool same_terms(const Capability& a, const Capability& b) {
  return a.kind == b.kind && a.read_only == b.read_only && a.store == b.store;
}

}  // namespace

proxy::LocalResponse capability_error(int status, std::string_view code, std::string_view message) {
  return {status, "application/json", gateway_error_body(code, message)};
}

CapabilityService::CapabilityService(AuditLog& audit, std::shared_ptr<StoreSet> stores, size_t threads,
                                     size_t max_pending, size_t per_store)
    : audit_(audit),
      stores_(std::move(stores)),
      gateway_(*stores_),
      max_pending_(max_pending),
      per_store_(std::max<size_t>(1, std::min(per_store, threads > 1 ? threads - 1 : 1))),
      pool_(threads) {}

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

void CapabilityService::shutdown() {
  {
    std::lock_guard lock(lanes_mu_);
    stopped_ = true;
  }
  pool_.join();
}

CapabilityCallCounts CapabilityService::counts() const {
  std::lock_guard lock(lanes_mu_);
  // A lane's running calls include those posted and waiting for a thread:
  // queued too, to the reader.
  uint64_t admitted = 0;
  CapabilityCallCounts c;
  for (const auto& [name, lane] : lanes_) {
    c.queued += lane.queued.size();
    admitted += lane.running;
  }
  c.running = std::min<uint64_t>(executing_.load(), admitted);
  c.queued += admitted - c.running;
  return c;
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
  if (pending_.fetch_add(1) >= max_pending_) {
    pending_.fetch_sub(1);
    audit_.post({"resource:deny", session->record.id, {{"status", 503}, {"code", "busy"}}});
    done(capability_error(503, "busy", "too many requests in progress"));
    return;
  }
  const std::string lane = lane_of(*session, request);
  std::unique_lock lock(lanes_mu_);
  if (stopped_) {
    lock.unlock();
    pending_.fetch_sub(1);
    done(capability_error(503, "unavailable", "zerod is stopping"));
    return;
  }
  Lane& l = lanes_[lane];
  Job job{std::move(session), std::move(request), std::move(done)};
  // A request naming no store of its session is answered at once (a 404):
  // it waits for no store's calls.
  if (!lane.empty() && l.running >= per_store_) {
    l.queued.push_back(std::move(job));
    return;
  }
  run_locked(lane, std::move(job));
}

void CapabilityService::run_locked(const std::string& lane, Job job) {
  ++lanes_[lane].running;
  asio::post(pool_, [this, lane, job = std::move(job)]() mutable {
    proxy::LocalResponse r;
    ++executing_;
    try {
      r = answer(*job.session, job.request);
    } catch (const std::exception&) {
      r = capability_error(500, "internal", "the request failed");
    }
    --executing_;
    pending_.fetch_sub(1);
    job.done(std::move(r));
    finished(lane);
  });
}

void CapabilityService::finished(const std::string& lane) {
  std::lock_guard lock(lanes_mu_);
  auto it = lanes_.find(lane);
  if (it == lanes_.end()) return;
  Lane& l = it->second;
  --l.running;
  if (!l.queued.empty()) {
    Job next = std::move(l.queued.front());
    l.queued.pop_front();
    run_locked(lane, std::move(next));
  } else if (l.running == 0) {
    lanes_.erase(it);
  }
}

}  // namespace zn::broker
