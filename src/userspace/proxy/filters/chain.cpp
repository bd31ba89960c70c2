#include "userspace/proxy/filters/chain.h"

#include "userspace/proxy/filters/approval_filter.h"
#include "userspace/proxy/filters/body_screen_filter.h"
#include "userspace/proxy/filters/body_swap_filter.h"
#include "userspace/proxy/filters/decision_filter.h"
#include "userspace/proxy/filters/head_screen_filter.h"
#include "userspace/proxy/filters/identity_filter.h"
#include "userspace/proxy/filters/local_service_filter.h"
#include "userspace/proxy/filters/placeholder_filter.h"
#include "userspace/proxy/filters/response_scrub_filter.h"
#include "userspace/proxy/filters/session_secrets_filter.h"
#include "userspace/proxy/filters/stream_screen_filter.h"
#include "userspace/proxy/filters/target_filter.h"
#include "userspace/proxy/filters/upgrade_filter.h"
#include "userspace/proxy/filters/verdict_filter.h"

namespace zn::proxy::filters {
namespace {

const TargetFilter kTarget;
const UpgradeFilter kUpgrade;
const LocalServiceFilter kLocalService;
const DecisionFilter kDecision;
const HeadScreenFilter kHeadScreen;
const SessionSecretsFilter kSessionSecrets;
const VerdictFilter kVerdict;
const ApprovalFilter kApproval;
const BodyScreenFilter kBodyScreen;
const BodySwapFilter kBodySwap;
const PlaceholderFilter kPlaceholders;
const IdentityFilter kIdentity;

// The request's head, in this order:
const HeadFilter* const kHeadOrder[] = {
    &kTarget,          // the target in its one normal form (400 if it has none)
    &kUpgrade,         // WebSocket handshakes checked and marked; other upgrades 403
    &kLocalService,    // the broker's own service answers a local connection
    &kDecision,        // one trip to the broker; the session's tripwires armed
    &kHeadScreen,      // tripwires in the path, query and fields: alarm and 403, whatever the verdict
    &kSessionSecrets,  // the scrubber armed with the session's secrets (first allowed request)
    &kVerdict,         // the broker's refusal (403, 421, 429) answered
    &kApproval,        // held for a human until approved
    &kBodyScreen,      // the body read ahead and screened (as decoded, if coded): alarm and 403
    &kBodySwap,        // placeholders in a JSON or form body read whole
    &kPlaceholders,    // placeholders in header values and the query
    &kIdentity,        // the rule's identity ready to place, its secret scrubbed from responses
};
// Then the exchange (intercept.cpp) sends the head (the codec places the
// identity; Range and Accept-Encoding not forwarded where responses are
// scrubbed) and the body: read whole, as the filters above left it, or
// streamed through guest_data_chain below.

const ResponseRulesFilter kResponseRules;
const ResponseHeadFilter* const kResponseOrder[] = {
    &kResponseRules,  // nothing the scrubber cannot read whole: 502
};

}  // namespace

ChainStop HeadChain::run(Request& request, Connection& connection, size_t from) const {
  for (size_t i = from; i < filters_.size(); ++i) {
    FilterResult r = filters_[i]->on_head(request, connection);
    if (r.kind != FilterResult::Kind::kContinue) return ChainStop{std::move(r), i};
  }
  return ChainStop{FilterResult::go(), filters_.size()};
}

FilterResult ResponseChain::run(const http::ResponseHead& response, Connection& connection) const {
  for (const ResponseHeadFilter* f : filters_) {
    FilterResult r = f->on_response_head(response, connection);
    if (r.kind != FilterResult::Kind::kContinue) return r;
  }
  return FilterResult::go();
}

const HeadChain& head_chain() {
  static const HeadChain chain(kHeadOrder);
  return chain;
}

const ResponseChain& response_chain() {
  static const ResponseChain chain(kResponseOrder);
  return chain;
}

// What the guest sends behind the head (a request body streamed behind it,
// a WebSocket's messages up), in this order:
DataChain guest_data_chain(const std::vector<Substitution>& exempt, Connection& connection) {
  DataChain chain;
  // tripwires, however escaped or split: alarm, and the connection ends
  if (connection.screen.armed()) chain.add(std::make_unique<StreamScreenFilter>(connection.screen, exempt));
  return chain;
}

// What the upstream sends behind its head (a response body, a WebSocket's
// messages down), in this order (then the audit record is written):
DataChain upstream_data_chain(Connection& connection, RequestSummary& summary) {
  DataChain chain;
  // every secret the connection was given, however encoded or split
  if (connection.scrubber.armed())
    chain.add(std::make_unique<ResponseScrubFilter>(connection.scrubber, summary));
  return chain;
}

}  // namespace zn::proxy::filters
