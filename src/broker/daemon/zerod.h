// zerod put together: datapath, sessions, audit, drop events, control API.
// One object so the binary and the tests start the very same thing. Its
// parts are services with declared lifetimes (zerod_services.cpp): started
// in an order where what each needs is there, stopped in reverse.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "broker/session/approval_book.h"
#include "broker/audit/log.h"
#include "broker/control/event_feed.h"
#include "broker/control/server.h"
#include "broker/daemon/approval_webhook.h"
#include "broker/daemon/config.h"
#include "broker/daemon/audit_export_service.h"
#include "broker/daemon/audit_retention.h"
#include "broker/daemon/host_keys.h"
#include "broker/daemon/service_graph.h"
#include "broker/daemon/session_participants.h"
#include "broker/identity/deployment_ca.h"
#include "broker/identity/jwt_minter.h"
#include "broker/control/document_server.h"
#include "broker/resources/store_set.h"
#include "broker/session/capability_service.h"
#include "broker/session/dns.h"
#include "broker/session/proxy.h"
#include "userspace/proxy/transparent_proxy.h"
#include "broker/session/registry.h"
#include "broker/commands/command_client.h"
#include "broker/exposure/exposure_service.h"
#include "broker/vms/vm_registry.h"
#include "userspace/dns/responder.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/listener_lookup.h"
#include "userspace/datapath/maps.h"

namespace zn::broker {

class ZerodDaemon {
 public:
  // Starts every service (zerod_services.cpp): enters config.netns (the
  // calling thread must be the only one), installs the steering routes,
  // loads or re-adopts the pinned datapath, restores the sessions of the
  // state file, ..., opens the control socket. The main thread, before any
  // other exists. Throws what a start threw, after stopping what had started.
  explicit ZerodDaemon(DaemonConfig config);
  // Stops (see stop()); the datapath stays attached and pinned.
  ~ZerodDaemon();

  // Stops the services in the reverse of their start: the control server
  // first, ..., the audit's exporters last, joining each one's threads.
  // Idempotent. Any thread but theirs (zerod's main thread, on its signal).
  void stop();
  // Parts zerod composed. Any thread (each part is thread-safe), until the
  // destructor.
  SessionRegistry& sessions() { return *registry_; }
  SessionDnsPolicy& dns_policy() { return *dns_policy_; }
  AuditLog& audit() { return *audit_; }

 private:
  // Each service's start and stop, bound to its declaration.
  void bind_services();
  void start_host_keys();
  void start_audit();
  void start_audit_export();
  void stop_audit_export();
  void start_capabilities();
  void start_sessions();
  void start_approvals();
  void start_vms();
  void start_exposures();
  void start_commands();
  void restore_sessions();
  void start_proxy();
  dp::Listeners listeners() const;  // the ports the datapath steers to
  void register_verbs();
  void drop_event_loop();
  std::string ca_dir() const { return config_.state_dir + "/ca"; }

  DaemonConfig config_;
  DeploymentCa ca_;  // its key sealed at rest under the host key
  std::unique_ptr<HostKeys> host_keys_;
  std::mutex rotation_mu_;  // one key.rotate at a time
  std::unique_ptr<dp::Datapath> datapath_;
  std::unique_ptr<dp::DatapathMaps> maps_;
  std::unique_ptr<AuditLog> audit_;
  // After audit_ (destroyed first: its exporters post audit:dropped to it).
  std::unique_ptr<AuditExportService> audit_export_;
  // The audit log's writer wakes the exporters through this, under
  // export_mu_ (held only for the non-blocking notify), so stop() can take
  // the service away before it is destroyed.
  std::mutex export_mu_;
  AuditExportService* audit_export_live_ = nullptr;
  std::unique_ptr<AuditRetention> audit_retention_;
  // Capability-scoped resources: the stores of the config, and the service
  // answering guests' requests to them (shut down before the proxy goes).
  std::shared_ptr<StoreSet> stores_;
  std::shared_ptr<CapabilityService> capabilities_;
  std::unique_ptr<SessionRegistry> registry_;
  std::unique_ptr<VmRegistry> vms_;             // a session's microVM
  std::unique_ptr<ExposureService> exposures_;  // declared guest ports
  std::unique_ptr<HostKeys> command_keys_;      // the command key file and its rotation
  std::unique_ptr<CommandClient> commands_;     // signed commands to agents; null: agent_port 0
  std::unique_ptr<SessionDnsPolicy> dns_policy_;
  std::unique_ptr<ConfiguredResolver> resolver_;
  std::shared_ptr<const proxy::DestinationGuard> guard_;  // where the proxy may connect
  std::unique_ptr<dns::Responder> dns_;
  // Held requests and their decisions for `znctl approval watch`, and the
  // webhook: both fed by the approval book's hooks; outlive control_.
  EventFeed approval_events_;
  std::unique_ptr<ApprovalWebhook> webhook_;  // null: no "approval_webhook"
  std::unique_ptr<ApprovalBook> approvals_;
  std::shared_ptr<JwtMinter> minter_;  // minted identities ("identity": "jwt")
  std::unique_ptr<SessionProxyPolicy> proxy_policy_;
  // The parts told of each session's changes (session_participants.h).
  std::unique_ptr<AuditSecretsParticipant> audit_secrets_part_;
  std::unique_ptr<CapabilityParticipant> capability_part_;
  std::unique_ptr<ApprovalParticipant> approval_part_;
  std::unique_ptr<GuestParticipant> guest_part_;
  std::unique_ptr<proxy::TransparentProxy> proxy_;
  std::unique_ptr<dp::ListenerLookup> listener_lookup_;  // over the proxy's and DNS's listeners
  EventFeed events_;  // live drop events for `znctl events`; outlives control_
  std::unique_ptr<ControlServer> control_;
  std::unique_ptr<DocumentServer> metrics_;
  std::unique_ptr<DocumentServer> jwks_;  // config jwks_address:jwks_port
  std::atomic<bool> stopping_{false};
  std::thread drop_events_;
  // Last: its stops run (from stop()) while every part above is there.
  ServiceGraph services_;
};

}  // namespace zn::broker
