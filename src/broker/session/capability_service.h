// A session's requests to its capabilities (issue 13): which of the
// session's own capabilities a handle names, the gateway call on the
// service's threads (store calls block on SQLite and disks), and the
// resource:read / resource:write / resource:deny audit record. The proxy's
// loop only hands a request over and gets the answer posted back.
#pragma once

#include <asio/thread_pool.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "broker/audit/log.h"
#include "broker/resources/gateway.h"
#include "broker/resources/store_set.h"
#include "broker/session/directory.h"
#include "broker/session/session.h"
#include "userspace/proxy/policy.h"

namespace zn::broker {

class CapabilityService {
 public:
  // `threads`: store calls at once; `max_pending`: requests queued or
  // running past which a new one is answered 503 at once (a slow query
  // cannot pile up the proxy's memory).
  CapabilityService(AuditLog& audit, std::shared_ptr<StoreSet> stores, size_t threads = 2,
                    size_t max_pending = 64);
  ~CapabilityService();  // shutdown()

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

  // The KV keys and queue messages of `before`'s capabilities that `after`
  // no longer holds (null: the session was deleted) are erased: nobody can
  // reach them again, and the store is shared. Blob and SQL stores are the
  // operator's and keep what was written. Control plane only (blocks on the
  // stores); failures are logged to the audit, never thrown.
  void release(const Session& before, const Session* after);

  // Why `policy` names a store zerod's config lacks ("$.caps.NAME.store"
  // and the reason, as a PolicyError), for SessionRegistry's check_policy.
  void check(const Policy& policy) const;

 private:
  proxy::LocalResponse answer(const Session& s, const proxy::LocalRequest& request);

  AuditLog& audit_;
  std::shared_ptr<StoreSet> stores_;
  ResourceGateway gateway_;
  const size_t max_pending_;
  std::atomic<size_t> pending_{0};
  std::mutex post_mu_;  // serve's post against shutdown
  bool stopped_ = false;
  asio::thread_pool pool_;
};

// The JSON error body every refusal of the gateway uses.
proxy::LocalResponse capability_error(int status, std::string_view code, std::string_view message);

}  // namespace zn::broker
