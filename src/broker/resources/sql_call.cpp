#include "broker/resources/sql_call.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <optional>

#include <sqlite3.h>

#include "broker/resources/store_io.h"

namespace zn::broker {

namespace {

using nlohmann::json;

// Address space above the heap bound: the executable, its libraries, stacks,
// the request and the reply's JSON (at most the result limit, twice).
constexpr uint64_t kAddressSpaceSlack = 256ull << 20;

constexpr StoreError kErrors[] = {StoreError::kNotFound,  StoreError::kReadOnly,   StoreError::kQuotaExceeded,
                                  StoreError::kTooLarge,  StoreError::kBadRequest, StoreError::kLimitExceeded,
                                  StoreError::kForbidden, StoreError::kInternal};

std::optional<StoreError> error_named(std::string_view name) {
  for (StoreError e : kErrors)
    if (to_string(e) == name) return e;
  return std::nullopt;
}

json limits_json(const SqlLimits& l) {
  return {{"max_statement_bytes", l.max_statement_bytes},
          {"max_params", l.max_params},
          {"max_rows", l.max_rows},
          {"max_result_bytes", l.max_result_bytes},
          {"max_value_bytes", l.max_value_bytes},
          {"max_vm_steps", l.max_vm_steps},
          {"max_memory_bytes", l.max_memory_bytes}};
}

SqlLimits limits_from(const json& j) {
  SqlLimits l;
  l.max_statement_bytes = j.at("max_statement_bytes").get<size_t>();
  l.max_params = j.at("max_params").get<int>();
  l.max_rows = j.at("max_rows").get<size_t>();
  l.max_result_bytes = j.at("max_result_bytes").get<size_t>();
  l.max_value_bytes = j.at("max_value_bytes").get<size_t>();
  l.max_vm_steps = j.at("max_vm_steps").get<uint64_t>();
  l.max_memory_bytes = j.at("max_memory_bytes").get<uint64_t>();
  return l;
}

std::string error_reply(StoreError code, std::string_view message) {
  return json{{"error", {{"code", to_string(code)}, {"message", message}}}}.dump();
}

std::optional<std::string> read_all(int fd) {
  std::string in;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    return in;
  }
}

void set_limit(int resource, uint64_t value) {
  const rlimit r{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
  ::setrlimit(resource, &r);
}

// Runs the parsed request; the reply to write.
std::string run(const json& request, size_t request_bytes) {
  const json& o = request.at("options");
  SqlStoreOptions options;
  options.path = o.at("path").get<std::string>();
  options.mode = o.at("mode").get<std::string>() == "rw" ? AccessMode::kReadWrite : AccessMode::kReadOnly;
  options.quota_bytes = o.at("quota_bytes").get<uint64_t>();
  options.limits = limits_from(o.at("limits"));
  const auto budget_ms = request.at("budget_ms").get<int64_t>();
  options.limits.time_budget = std::chrono::milliseconds(std::max<int64_t>(budget_ms, 1));
  const std::string statement = request.at("sql").get<std::string>();
  const json params = request.at("params");

  // The bounds of this process, set once its input is read: the heap SQLite
  // may use (NOMEM past it, refused as a limit), the address space behind
  // it (anything else that allocates), CPU time should the deadline's kill
  // never come (the parent died), and nothing of it kept on disk.
  const uint64_t heap = options.limits.max_memory_bytes;
  sqlite3_hard_heap_limit64(static_cast<sqlite3_int64>(heap));
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (A sanitizer's shadow memory is terabytes of address space: in such a
  // build, the test suites', the heap limit stands alone.)
  set_limit(RLIMIT_AS, heap + kAddressSpaceSlack + request_bytes * 4);
#else
  (void)request_bytes;
#endif
  set_limit(RLIMIT_CPU, static_cast<uint64_t>(budget_ms / 1000 + 2));
  set_limit(RLIMIT_CORE, 0);
  set_limit(RLIMIT_NOFILE, 32);

  std::optional<SqlConnection> connection;
  try {
    connection.emplace(options);
  } catch (const std::runtime_error&) {
    // The operator's file (a path) stays out of the guest's answer.
    return error_reply(StoreError::kInternal, "store unavailable");
  }
  StoreResult<SqlOutcome> out = connection->execute(statement, params);
  if (!out.ok()) return error_reply(out.error(), out.message());
  return json{{"rows", std::move(out.value().rows)}, {"changes", out.value().changes}}.dump();
}

}  // namespace

std::string encode_sql_request(const SqlStoreOptions& options, std::string_view statement,
                               const nlohmann::json& params, std::chrono::milliseconds budget) {
  json o = {{"path", options.path},
            {"mode", options.mode == AccessMode::kReadWrite ? "rw" : "ro"},
            {"quota_bytes", options.quota_bytes},
            {"limits", limits_json(options.limits)}};
  // The gateway's statement and parameters come from a JSON body, so they
  // are UTF-8; anything else is replaced (U+FFFD), never passed as bytes.
  return json{{"options", std::move(o)},
              {"sql", std::string(statement)},
              {"params", params},
              {"budget_ms", budget.count()}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

StoreResult<SqlOutcome> decode_sql_reply(std::string_view reply) {
  const json doc = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  auto died = [] { return store_fail(StoreError::kInternal, "the statement's process failed"); };
  if (!doc.is_object()) return died();
  if (auto e = doc.find("error"); e != doc.end()) {
    if (!e->is_object() || !e->contains("code") || !(*e)["code"].is_string() || !e->contains("message") ||
        !(*e)["message"].is_string())
      return died();
    const std::optional<StoreError> code = error_named((*e)["code"].get<std::string>());
    if (!code) return died();
    return store_fail(*code, (*e)["message"].get<std::string>());
  }
  auto rows = doc.find("rows");
  auto changes = doc.find("changes");
  if (rows == doc.end() || !rows->is_array() || changes == doc.end() || !changes->is_number_integer())
    return died();
  SqlOutcome out;
  out.rows = std::move(*rows);
  out.changes = changes->get<int64_t>();
  return out;
}

int sql_call_main(int in_fd, int out_fd) {
  // Gone with zerod: a call outlives nothing that asked for it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string reply;
  try {
    std::optional<std::string> in = read_all(in_fd);
    if (!in) return 2;
    const json request = json::parse(*in, nullptr, /*allow_exceptions=*/false);
    if (!request.is_object()) return 2;
    reply = run(request, in->size());
  } catch (const std::bad_alloc&) {
    reply = error_reply(StoreError::kLimitExceeded, "memory limit passed");
  } catch (const std::exception&) {
    return 2;  // a malformed request: the parent's bug, answered as the process failing
  }
  return write_all(out_fd, reply) ? 0 : 2;
}

}  // namespace zn::broker
