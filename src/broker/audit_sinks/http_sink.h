// The HTTP sink (issue 16): a batch as one POST (or several, where the
// receiver caps a request) through libcurl, in one of three shapes:
//   json_lines  the lines and the seal, each ending in "\n" (application/x-ndjson)
//   splunk_hec  Splunk's HTTP Event Collector: concatenated event objects
//   datadog     Datadog's logs intake: a JSON array of log entries
// A 2xx answer is a delivery; anything else throws SinkError, with the
// receiver's Retry-After on a 429 or 503. The token goes only into its
// header: no error message carries it, nor more than a short, cleaned
// excerpt of the receiver's answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "broker/audit_export/sink.h"
#include "broker/secrets/secret.h"

namespace zn::broker::audit_sinks {

enum class HttpShape { kJsonLines, kSplunkHec, kDatadog };

struct HttpSinkOptions {
  std::string url;  // http:// or https://
  HttpShape shape = HttpShape::kJsonLines;
  Secret token;         // Splunk/Datadog: required; json_lines: "Authorization: Bearer" when set
  std::string ca_file;  // https: the CAs to trust; empty = the system's store
  std::chrono::milliseconds timeout{10000};  // per request, connect included
};

// Datadog's intake refuses a request over 5 MB or 1000 entries.
inline constexpr size_t kDatadogMaxEntries = 1000;
inline constexpr size_t kDatadogMaxBytes = 5 * 1000 * 1000;

// One request: its body, what it says about it, and how many of the
// batch's entries (lines plus the seal) it carries.
struct HttpRequestBody {
  std::string content_type;
  std::string body;
  size_t entries = 0;
};

// The requests a batch becomes in `shape` (more than one only for Datadog).
std::vector<HttpRequestBody> http_request_bodies(HttpShape shape, const audit_export::ExportBatch& batch,
                                                 const std::string& host);

class HttpSink : public audit_export::AuditSink {
 public:
  HttpSink(HttpSinkOptions options, audit_export::SinkContext context);
  ~HttpSink() override;

  // Sends the batch's requests in order; the first that fails throws (the
  // exporter then sends the whole batch again: receivers dedupe by seq).
  void deliver(const audit_export::ExportBatch& batch) override;
  void close() override;

 private:
  struct Handle;
  void post(const HttpRequestBody& request);

  HttpSinkOptions options_;
  audit_export::SinkContext context_;
  std::string where_;               // the URL without its query, for messages
  std::unique_ptr<Handle> handle_;  // kept between batches for keep-alive
};

}  // namespace zn::broker::audit_sinks
