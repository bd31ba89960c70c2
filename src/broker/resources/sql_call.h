// One SQL call as it crosses into zn-sql-call's process and back (issue 30):
// SqlStore writes the request, the helper runs it on a SqlConnection of its
// own and writes the reply. JSON both ways, one document each.
//
//   request: {"options": {path, mode, quota_bytes, limits}, "sql", "params", "budget_ms"}
//   reply:   {"rows", "changes"} or {"error": {"code": to_string(StoreError), "message"}}
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/resources/sql_connection.h"

namespace zn::broker {

std::string encode_sql_request(const SqlStoreOptions& options, std::string_view statement,
                               const nlohmann::json& params, std::chrono::milliseconds budget);

// The reply as the call's result; kInternal when it is not one (the process
// died before it wrote a whole reply).
StoreResult<SqlOutcome> decode_sql_reply(std::string_view reply);

// zn-sql-call's whole work: reads a request from in_fd to its end, bounds
// its own process (heap, address space, CPU time, no core file, few
// descriptors), runs the statement and writes the reply to out_fd. Returns
// the exit status: 0 when a reply was written (an answer or a refusal).
int sql_call_main(int in_fd, int out_fd);

}  // namespace zn::broker
