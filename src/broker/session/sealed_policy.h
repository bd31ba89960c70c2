// Session policies at rest (issue 12): the policy JSON a session was given,
// with every resource value replaced by an envelope sealed under the host key
// (secrets/sealer.h) for that session, resource and field. This is what the
// session's record holds in memory and what the state file stores, so
// neither carries a value: a copy of the state directory without the key
// reveals nothing, and an envelope moved to another session or field does not
// open.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "broker/policy/policy.h"
#include "broker/secrets/host_key.h"

namespace zn::broker {

// A sealed value that does not open under any key the host has (a missing or
// replaced key, a damaged file): zerod refuses to start rather than drop the
// session or come up with an empty store. The message names the session,
// resource and field and why (the key ids), never a value.
class SealedStateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "zeroness/session/<id>/resources/<resource>/<field>": the associated data
// a value is sealed for.
std::string resource_context(std::string_view session_id, std::string_view resource, std::string_view field);

// The policy JSON with its resource values sealed. `policy_json` has passed
// parse_policy already; throws std::invalid_argument if it is not JSON.
std::string seal_policy_json(const HostKey& key, std::string_view session_id, std::string_view policy_json);

struct OpenedPolicy {
  Policy policy;
  // Values that were not envelopes: a state file written before sealing.
  // The caller re-seals the record (and rewrites the file).
  bool had_plaintext = false;
  // Values sealed under keys[i] for i > 0 (a rotation to keys[1] that a
  // crash interrupted).
  bool had_other_key = false;
};

// Parses a sealed policy (parse_policy), each value unsealed under whichever
// of `keys` sealed it (the host's key first). Throws SealedStateError for a
// value no key opens, PolicyError for a policy that does not parse.
OpenedPolicy open_sealed_policy(std::span<const HostKey* const> keys, std::string_view session_id,
                                std::string_view sealed_json);

// Key rotation: the same policy with every value resealed under `to` (values
// already under `to` are kept). Throws SealedStateError as above.
std::string reseal_policy_json(const HostKey& from, const HostKey& to, std::string_view session_id,
                               std::string_view sealed_json);

}  // namespace zn::broker
