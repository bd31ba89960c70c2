// zerod's control verbs, registered on its ControlServer one family at a
// time, each with only what it acts on. zerod owns all of it, and it
// outlives the server (stop the server first).
//
// Register before ControlServer::start(), on the thread composing zerod. The
// handlers then run on the server's client threads (one per connection, so
// several at once); they may block (registry lock, map syscalls, audit
// commits), and they never run on an I/O loop.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "broker/audit/log.h"
#include "broker/control/event_feed.h"
#include "broker/control/server.h"
#include "broker/session/approval_book.h"
#include "broker/session/dns.h"
#include "broker/session/proxy.h"
#include "broker/session/registry.h"
#include "broker/exposure/exposure_service.h"
#include "broker/vms/vm_registry.h"
#include "userspace/datapath/maps.h"
#include "userspace/dns/counters.h"
#include "userspace/dns/responder.h"

namespace zn::broker {

// status: the number of sessions, the pin root, the namespace, the DNS
// responder's query counts.
void register_status_verb(ControlServer& server, const SessionRegistry& registry, const dns::Responder& dns,
                          std::string pin_root, std::string netns);

// What session.list, .show, .create, .update and .delete act on: the
// registry alone, whose one call per change tells every part of zerod that
// keeps something of the session (session/participant.h).
struct SessionVerbs {
  SessionRegistry& registry;
  std::string ca_certificate;  // the deployment CA's path, shown with each session
};
void register_session_verbs(ControlServer& server, const SessionVerbs& verbs);

// approval.list, approval.allow and approval.deny: held requests, each
// decision audited with the deciding uid (egress:approved, egress:denied).
// approval.allow {"ticket", "for_s", "path"} with for_s also grants the
// request's shape for that long (grant:created); approval.grants lists the
// live grants, approval.revoke {"grant"} ends one (grant:revoked).
void register_approval_verbs(ControlServer& server, ApprovalBook& approvals, AuditLog& audit);
// approval.watch (streaming): the pending tickets, then each change of a
// ticket or grant as the approval book reports it (published to `feed`).
void register_approval_watch_verb(ControlServer& server, ApprovalBook& approvals, EventFeed& feed);

// A held request as approval.list, watch and the webhook show it (header
// names and the redacted preview, never a header value); held_s is the time
// held at `now`.
nlohmann::json held_request_json(
    const HeldRequest& h, std::chrono::system_clock::time_point now = std::chrono::system_clock::now());
nlohmann::json grant_json(const Grant& g);
// What approval.watch streams for each change: {"event": "held" | "approved" |
// "denied" | "expired" | "pending", ...the request, "uid" of who decided}, or
// {"event": "grant_created" | "grant_revoked" | "grant_expired" |
// "grant_session_deleted", "grant": ...}.
nlohmann::json ticket_notice(const HeldRequest& h, TicketEvent event, std::optional<uint32_t> uid);
nlohmann::json grant_notice(const Grant& g, GrantEvent event);

// stats: each session's (or the one asked for) non-zero datapath verdict counters.
void register_stats_verb(ControlServer& server, const SessionRegistry& registry,
                         const dp::DatapathMaps& maps);

// events (streaming): live drop events from `feed`.
void register_events_verb(ControlServer& server, EventFeed& feed);

// The answers' JSON, apart for tests. Pure; any thread.
nlohmann::json status_json(size_t sessions, const std::string& pin_root, const std::string& netns,
                           const dns::DnsCountersSnapshot& dns);
// A session as the control API shows it; with_policy adds the compiled
// policy, never its resources' values.
nlohmann::json session_json(const Session& session, const std::string& ca_certificate, bool with_policy);
// Non-zero counters by verdict name ("pass:dns": 3).
nlohmann::json verdicts_json(const dp::SessionCounters& counters);

}  // namespace zn::broker
