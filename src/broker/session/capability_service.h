// A session's requests to its capabilities (issue 13): which of the
// session's own capabilities a handle names, the gateway call on the
// service's threads (store calls block on SQLite and disks), and the
// resource:read / resource:write / resource:deny audit record. The proxy's
// loop only hands a request over and gets the answer posted back.
//
// Calls share the service's threads fairly (issue 32): each session's calls
// wait in the session's own queue and sessions take turns (FairPool), at
// most `per_session` of one session's calls run at once, and at most
// `per_store` of one store's whoever's they are. With the defaults (8
// threads, 3 per session, 2 per store) two sessions whose every call runs to
// its time budget leave two threads to the others, and the next session's
// call starts at once; a slow store holds two, and a session's slow store
// leaves it a thread for its other stores. When `max_pending` calls wait,
// the session with the most waiting gives way (its newest is answered 503
// busy): one session's flood never refuses another's call.
//
// Revocation is immediate (issue 30): a call is authorised at execution, not
// when it was queued — its handle is looked up in its session as it is now
// (set_sessions), so a call queued before an update or a delete that removed
// its capability is refused (404, audited resource:deny with reason
// "revoked"). A call already running when its capability is revoked is
// cancelled (a SQL call's process is killed) or, for the short KV, blob and
// queue calls, finishes; release() waits for it before it erases what the
// capability held, and the update or delete returns only then. So once
// `session update` or `session delete` has answered, nothing of a removed
// capability takes effect, and no KV key or queue message of it stays.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "broker/audit/log.h"
#include "broker/resources/gateway.h"
#include "broker/resources/store_set.h"
#include "broker/session/directory.h"
#include "broker/session/session.h"
#include "common/fair_pool.h"
#include "userspace/proxy/policy.h"

namespace zn::broker {

// Calls waiting in a store's queue and calls running, for the metrics.
struct CapabilityCallCounts {
  uint64_t queued = 0;
  uint64_t running = 0;
};

class CapabilityService {
 public:
  // `threads`: store calls at once; `max_pending`: requests waiting past
  // which one is answered 503 (a slow query cannot pile up the proxy's
  // memory); `per_store` and `per_session`: calls of one store, of one
  // session running at once (each at most threads - 1, so another store and
  // another session always have one).
  CapabilityService(AuditLog& audit, std::shared_ptr<StoreSet> stores, size_t threads = 8,
                    size_t max_pending = 64, size_t per_store = 2, size_t per_session = 3);
  ~CapabilityService();  // shutdown()

  // Where a call finds its session as it is when it runs (null: deleted).
  // Set once before the first serve; unset, a call uses the session it was
  // queued with (unit tests of one layer).
  void set_sessions(std::function<SessionPtr(const std::string& id)> current) {
    current_ = std::move(current);
  }

  // Answers every later request 503 at once and waits for the ones queued
  // or running (their answers are posted to the proxy's loops, which must
  // still exist: zerod calls this before it destroys the proxy).
  void shutdown();
  CapabilityService(const CapabilityService&) = delete;
  CapabilityService& operator=(const CapabilityService&) = delete;

  // Answers `request` from `session`'s capabilities on the service's
  // threads; `done` is called once, from one of them (or here, at once, when
  // the service is full). Never throws.
  void serve(SessionPtr session, proxy::LocalRequest request, std::function<void(proxy::LocalResponse)> done);

  // The capability of `s` bound to exactly this handle (compared in constant
  // time), nullopt for any other string: another session's handle is as
  // unknown here as a guessed one.
  static std::optional<BoundCapability> bound(const Session& s, std::string_view handle);

  // `before`'s capabilities that `after` no longer holds as they were (null:
  // the session was deleted) are revoked: their running calls cancelled or
  // waited for (after has been published: no new call of them starts), then
  // the KV keys and queue messages of a handle `after` no longer holds are
  // erased (nobody can reach them again, and the store is shared). Blob and
  // SQL stores are the operator's and keep what was written. Control plane
  // only (blocks on the stores); failures are logged to the audit, never
  // thrown.
  void release(const Session& before, const Session* after);

  // Why `policy` names a store zerod's config lacks ("$.caps.NAME.store"
  // and the reason, as a PolicyError), for SessionRegistry's check_policy.
  void check(const Policy& policy) const;

  CapabilityCallCounts counts() const;

 private:
  // A call between its handle's lookup and its end, for release().
  struct Running {
    std::string session;
    std::string handle;
    std::atomic<bool> cancelled{false};
  };

  // The store a request's handle names in its session ("kind/name"), ""
  // when it names none (answered at once, whatever it is).
  static std::string lane_of(const Session& s, const proxy::LocalRequest& request);
  proxy::LocalResponse answer(const Session& s, const proxy::LocalRequest& request);
  void revoke(const std::string& session, const std::set<std::string>& handles);

  AuditLog& audit_;
  std::shared_ptr<StoreSet> stores_;
  ResourceGateway gateway_;
  std::function<SessionPtr(const std::string&)> current_;

  mutable std::mutex running_mu_;
  std::condition_variable running_cv_;
  std::list<Running*> running_;

  FairPool pool_;  // last: its threads end before what they use
};

// The JSON error body every refusal of the gateway uses.
proxy::LocalResponse capability_error(int status, std::string_view code, std::string_view message);

}  // namespace zn::broker
