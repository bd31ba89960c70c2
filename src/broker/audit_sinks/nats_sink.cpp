#include "broker/audit_sinks/nats_sink.h"

#include <optional>
#include <stdexcept>
#include <utility>

#include "broker/audit_sinks/nats_connection.h"

namespace zn::broker::audit_sinks {
namespace {

using json = nlohmann::json;
using audit_export::SinkError;

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw std::invalid_argument(path + ": " + message);
}

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool is_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// One server of the url list: nats://host[:port] or tls://host[:port], host
// a name, an IPv4 address or a bracketed IPv6 one. No user, password or
// token: secrets go in creds_file, never in the config's text.
std::optional<std::string> bad_server_url(const std::string& url) {
  std::string rest;
  if (url.rfind("nats://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("tls://", 0) == 0) {
    rest = url.substr(6);
  } else {
    return "must start with nats:// or tls://";
  }
  if (rest.find('@') != std::string::npos) return "must not carry credentials (use creds_file)";
  for (char c : rest)
    if (c == '/' || c == '?' || c == '#' || static_cast<unsigned char>(c) <= ' ')
      return "must be scheme://host[:port] only";
  std::string host = rest;
  std::string port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) return "unclosed '[' in the host";
    host = rest.substr(0, close + 1);
    const std::string after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "must be scheme://host[:port] only";
      port = after.substr(1);
      if (port.empty()) return "empty port";
    }
  } else if (const size_t colon = rest.find(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) return "empty port";
  }
  if (host.empty() || host == "[]") return "has no host";
  if (!port.empty() &&
      (!is_digits(port) || port.size() > 5 || std::stoul(port) == 0 || std::stoul(port) > 65535))
    return "port must be 1-65535";
  return std::nullopt;
}

std::string string_field(const json& config, const std::string& path, const char* key, std::string fallback,
                         bool required) {
  if (!config.contains(key)) {
    if (required) fail(path + "." + key, "required");
    return fallback;
  }
  const json& v = config[key];
  if (!v.is_string()) fail(path + "." + key, "must be a string");
  return v.get<std::string>();
}

std::string absolute_path_field(const json& config, const std::string& path, const char* key) {
  if (!config.contains(key)) return {};
  const json& v = config[key];
  if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().front() != '/')
    fail(path + "." + key, "must be an absolute path");
  return v.get<std::string>();
}

class NatsSink final : public audit_export::AuditSink {
 public:
  NatsSink(NatsSinkConfig config, std::string host_token)
      : config_(std::move(config)),
        host_(std::move(host_token)),
        subject_base_(config_.subject_prefix + "." + host_) {}

  void deliver(const audit_export::ExportBatch& batch) override {
    if (batch.lines.size() != batch.records.size())
      throw SinkError("nats: batch has " + std::to_string(batch.lines.size()) + " lines for " +
                      std::to_string(batch.records.size()) + " records");
    try {
      if (!conn_ || !conn_->usable()) open();
      for (size_t i = 0; i < batch.lines.size(); ++i) {
        const AuditRecord& record = batch.records[i];
        publish(subject_base_ + "." + nats_subject_token(audit_export::event_category(record.event)),
                host_ + "-" + std::to_string(record.seq), batch.lines[i]);
      }
      if (!batch.seal_line.empty())
        publish(subject_base_ + ".seal",
                host_ + "-seal-" + std::to_string(batch.first_seq) + "-" + std::to_string(batch.last_seq),
                batch.seal_line);
    } catch (const NatsError& e) {
      // Whatever failed, the next attempt starts from a fresh connection.
      conn_.reset();
      throw SinkError(std::string("nats: ") + e.what());
    }
  }

  void close() override { conn_.reset(); }

 private:
  void open() {
    conn_.reset();
    auto conn = std::make_unique<NatsConnection>(
        NatsEndpoint{config_.url, config_.ca_file, config_.creds_file, config_.timeout});
    ensure_stream(*conn);
    conn_ = std::move(conn);
  }

  void ensure_stream(const NatsConnection& conn) {
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = js_GetStreamInfo(&info, conn.jetstream(), config_.stream.c_str(), nullptr, &code);
    if (s == NATS_OK) {
      jsStreamInfo_Destroy(info);
      return;
    }
    if (s != NATS_NOT_FOUND) throw NatsError(nats_failure("stream " + config_.stream + ": info", s, code));
    const std::string subjects = config_.subject_prefix + ".>";
    const char* subject_list[] = {subjects.c_str()};
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = config_.stream.c_str();
    cfg.Description = "zeroness audit records and seals";
    cfg.Subjects = subject_list;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Duplicates = std::chrono::duration_cast<std::chrono::nanoseconds>(kNatsDuplicateWindow).count();
    code = static_cast<jsErrCode>(0);
    s = js_AddStream(&info, conn.jetstream(), &cfg, nullptr, &code);
    jsStreamInfo_Destroy(info);
    // Another host's sink may have created it a moment ago.
    if (s != NATS_OK && code != JSStreamNameExistErr)
      throw NatsError(nats_failure("stream " + config_.stream + ": create", s, code));
  }

  // One message, stored (or found already stored under its id) when this
  // returns; NatsError otherwise.
  void publish(const std::string& subject, const std::string& msg_id, const std::string& payload) {
    jsPubOptions opts;
    jsPubOptions_Init(&opts);
    opts.MsgId = msg_id.c_str();
    opts.ExpectStream = config_.stream.c_str();
    opts.MaxWait = config_.timeout.count();
    jsPubAck* ack = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = js_Publish(&ack, conn_->jetstream(), subject.c_str(), payload.data(),
                                    static_cast<int>(payload.size()), &opts, &code);
    jsPubAck_Destroy(ack);
    if (s == NATS_NO_RESPONDERS)
      throw NatsError(nats_failure("publish " + subject + ": no stream takes this subject", s, code));
    if (s != NATS_OK) throw NatsError(nats_failure("publish " + subject, s, code));
  }

  NatsSinkConfig config_;
  std::string host_;          // as a subject token
  std::string subject_base_;  // "<subject_prefix>.<host>"
  std::unique_ptr<NatsConnection> conn_;
};

}  // namespace

std::string nats_subject_token(const std::string& name) {
  if (name.empty()) return "%";
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == '.') {
      out += '_';
    } else if (is_token_char(c) && c != '_') {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
    }
  }
  return out;
}

std::string nats_host_subject(const std::string& subject_prefix, const std::string& host) {
  return subject_prefix + "." + nats_subject_token(host);
}

NatsSinkConfig parse_nats_sink_config(const json& config, const std::string& path) {
  if (!config.is_object()) fail(path, "must be an object");
  static const char* const kFields[] = {"type",       "url",     "stream",    "subject_prefix",
                                        "creds_file", "ca_file", "timeout_ms"};
  for (const auto& [key, value] : config.items()) {
    (void)value;
    bool known = false;
    for (const char* k : kFields) known = known || key == k;
    if (!known) fail(path + "." + key, "unknown field");
  }
  if (string_field(config, path, "type", "", true) != "nats") fail(path + ".type", "must be \"nats\"");

  NatsSinkConfig out;
  out.url = string_field(config, path, "url", "", true);
  if (out.url.empty()) fail(path + ".url", "must not be empty");
  // A comma-separated list of servers of one cluster, as libnats takes it.
  for (size_t start = 0;;) {
    const size_t comma = out.url.find(',', start);
    const std::string one =
        out.url.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    // Quoted back unless it holds credentials: those never reach a log.
    if (auto bad = bad_server_url(one))
      fail(path + ".url", (one.find('@') == std::string::npos ? "\"" + one + "\" " : "a server ") + *bad);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }

  out.stream = string_field(config, path, "stream", out.stream, false);
  if (out.stream.empty() || out.stream.size() > 128)
    fail(path + ".stream", "must be 1-128 characters of [A-Za-z0-9_-]");
  for (char c : out.stream)
    if (!is_token_char(c)) fail(path + ".stream", "must be 1-128 characters of [A-Za-z0-9_-]");

  out.subject_prefix = string_field(config, path, "subject_prefix", out.subject_prefix, false);
  {
    const std::string& p = out.subject_prefix;
    const char* why = "must be dot-separated tokens of [A-Za-z0-9_-] (no wildcards, no empty token)";
    if (p.empty() || p.size() > 128) fail(path + ".subject_prefix", why);
    if (p.front() == '.' || p.back() == '.' || p.find("..") != std::string::npos)
      fail(path + ".subject_prefix", why);
    for (char c : p)
      if (c != '.' && !is_token_char(c)) fail(path + ".subject_prefix", why);
  }

  out.creds_file = absolute_path_field(config, path, "creds_file");
  out.ca_file = absolute_path_field(config, path, "ca_file");

  if (config.contains("timeout_ms")) {
    const json& v = config["timeout_ms"];
    // Signed or not: parsed text gives unsigned, a json built in code signed.
    if (!v.is_number_integer() || v.get<int64_t>() < 100 || v.get<int64_t>() > 600000)
      fail(path + ".timeout_ms", "must be an integer between 100 and 600000");
    out.timeout = std::chrono::milliseconds(v.get<int64_t>());
  }
  return out;
}

void check_nats_sink(const json& config, const std::string& path) {
  (void)parse_nats_sink_config(config, path);
}

std::unique_ptr<audit_export::AuditSink> make_nats_sink(const json& config, const std::string& path,
                                                        const audit_export::SinkContext& context) {
  NatsSinkConfig parsed = parse_nats_sink_config(config, path);
  if (context.host.empty()) fail(path, "this host has no name to publish under");
  return std::make_unique<NatsSink>(std::move(parsed), nats_subject_token(context.host));
}

}  // namespace zn::broker::audit_sinks
