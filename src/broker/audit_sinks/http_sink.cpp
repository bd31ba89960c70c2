#include "broker/audit_sinks/http_sink.h"

#include <curl/curl.h>
#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zn::broker::audit_sinks {

using audit_export::ExportBatch;
using audit_export::SinkError;

namespace {

constexpr size_t kExcerptBytes = 200;
constexpr size_t kCapturedBodyBytes = 4096;
// A receiver's Retry-After is followed, up to an hour: a larger one is a
// misconfigured receiver and would hold the audit back for longer than any
// outage it could mean.
constexpr long long kMaxRetryAfterSeconds = 3600;

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// RFC 3339 with milliseconds, as format_audit_ts writes it, to epoch ms.
std::optional<long long> epoch_ms(const std::string& ts) {
  int y, mo, d, h, mi, s, ms;
  char z;
  if (std::sscanf(ts.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &s, &ms, &z) != 8 ||
      z != 'Z')
    return std::nullopt;
  using namespace std::chrono;
  const year_month_day date{year{y} / month{static_cast<unsigned>(mo)} / day{static_cast<unsigned>(d)}};
  if (!date.ok()) return std::nullopt;
  const auto tp = sys_days{date} + hours{h} + minutes{mi} + seconds{s} + milliseconds{ms};
  return duration_cast<milliseconds>(tp.time_since_epoch()).count();
}

long long now_epoch_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// The seal's own time when it carries one, else now.
long long seal_epoch_ms(const std::string& seal_line) {
  const auto seal = nlohmann::json::parse(seal_line, nullptr, false);
  if (seal.is_object() && seal.contains("ts") && seal["ts"].is_string())
    if (auto ms = epoch_ms(seal["ts"].get<std::string>())) return *ms;
  return now_epoch_ms();
}

// HEC's "time": epoch seconds with milliseconds, as a JSON number.
std::string hec_time(long long ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lld.%03lld", ms / 1000, ms % 1000);
  return buf;
}

std::string hec_event(long long ms, const std::string& host, const std::string& line) {
  // The line goes in as the JSON it is, byte for byte; one that is not JSON
  // (never, from the exporter) goes in as a string rather than break the request.
  const std::string event = nlohmann::json::accept(line) ? line : json_string(line);
  return "{\"time\":" + hec_time(ms) + ",\"host\":" + json_string(host) +
         ",\"source\":\"zerod\",\"sourcetype\":\"zeroness:audit\",\"event\":" + event + "}";
}

std::string datadog_entry(const std::string& host, const std::string& category, const std::string& line) {
  nlohmann::ordered_json entry{{"ddsource", "zeroness"},
                               {"service", "zerod"},
                               {"hostname", host},
                               {"ddtags", "category:" + category},
                               {"message", line}};
  return entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string category_of(const ExportBatch& batch, size_t i) {
  return i < batch.records.size() ? audit_export::event_category(batch.records[i].event) : "";
}

std::vector<HttpRequestBody> datadog_bodies(const ExportBatch& batch, const std::string& host) {
  std::vector<HttpRequestBody> out;
  HttpRequestBody current{"application/json", "[", 0};
  const auto add = [&](const std::string& entry) {
    // +2: the comma before it and the closing bracket.
    if (current.entries > 0 && (current.entries == kDatadogMaxEntries ||
                                current.body.size() + entry.size() + 2 > kDatadogMaxBytes)) {
      current.body += ']';
      out.push_back(std::move(current));
      current = HttpRequestBody{"application/json", "[", 0};
    }
    if (current.entries > 0) current.body += ',';
    current.body += entry;
    ++current.entries;
  };
  for (size_t i = 0; i < batch.lines.size(); ++i)
    add(datadog_entry(host, category_of(batch, i), batch.lines[i]));
  if (!batch.seal_line.empty()) add(datadog_entry(host, "audit-seal", batch.seal_line));
  current.body += ']';
  out.push_back(std::move(current));
  return out;
}

// What a response said, as far as a message may repeat it.
struct Response {
  std::optional<std::chrono::milliseconds> retry_after;
  std::string body;  // the first kCapturedBodyBytes only
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<Response*>(user);
  const std::string_view line(data, size * count);
  constexpr std::string_view kName = "retry-after:";
  if (line.starts_with("HTTP/")) response->retry_after.reset();  // a new response (after a 100)
  if (line.size() <= kName.size()) return size * count;
  for (size_t i = 0; i < kName.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != kName[i]) return size * count;
  std::string value(line.substr(kName.size()));
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  value.erase(value.begin(), std::find_if(value.begin(), value.end(), not_space));
  value.erase(std::find_if(value.rbegin(), value.rend(), not_space).base(), value.end());
  long long seconds = -1;
  if (!value.empty() && value.size() <= 9 &&
      std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); })) {
    seconds = std::stoll(value);
  } else if (const time_t when = curl_getdate(value.c_str(), nullptr); when >= 0) {
    seconds = std::max<long long>(0, when - std::time(nullptr));  // an HTTP-date
  }
  if (seconds >= 0) response->retry_after = std::chrono::seconds(std::min(seconds, kMaxRetryAfterSeconds));
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<Response*>(user);
  const size_t n = size * count;
  if (response->body.size() < kCapturedBodyBytes)
    response->body.append(data, std::min(n, kCapturedBodyBytes - response->body.size()));
  return n;
}

// At most kExcerptBytes of printable ASCII, the token (if the receiver
// echoed it) replaced first.
std::string excerpt(std::string body, const Secret& token) {
  if (!token.empty()) {
    token.reveal([&](std::string_view t) {
      for (size_t at = body.find(t); at != std::string::npos; at = body.find(t, at))
        body.replace(at, t.size(), Secret::kRedacted);
    });
  }
  std::string out;
  for (const char c : body) {
    if (out.size() == kExcerptBytes) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 32 && u < 127) ? c : ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Headers for one request; the one carrying the token is wiped when done.
class HeaderList {
 public:
  HeaderList() = default;
  ~HeaderList() {
    for (curl_slist* h = list_; h; h = h->next) sodium_memzero(h->data, std::strlen(h->data));
    curl_slist_free_all(list_);
  }
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  void add(std::string header) {
    curl_slist* grown = curl_slist_append(list_, header.c_str());
    sodium_memzero(header.data(), header.size());
    if (!grown) throw std::bad_alloc();
    list_ = grown;
  }
  curl_slist* get() const { return list_; }

 private:
  curl_slist* list_ = nullptr;
};

}  // namespace

std::vector<HttpRequestBody> http_request_bodies(HttpShape shape, const ExportBatch& batch,
                                                 const std::string& host) {
  const size_t entries = batch.lines.size() + (batch.seal_line.empty() ? 0 : 1);
  switch (shape) {
    case HttpShape::kJsonLines: {
      HttpRequestBody request{"application/x-ndjson", "", entries};
      for (const auto& line : batch.lines) request.body += line + '\n';
      if (!batch.seal_line.empty()) request.body += batch.seal_line + '\n';
      return {std::move(request)};
    }
    case HttpShape::kSplunkHec: {
      HttpRequestBody request{"application/json", "", entries};
      for (size_t i = 0; i < batch.lines.size(); ++i) {
        const auto ms = i < batch.records.size() ? epoch_ms(batch.records[i].ts) : std::nullopt;
        request.body += hec_event(ms ? *ms : now_epoch_ms(), host, batch.lines[i]) + '\n';
      }
      if (!batch.seal_line.empty())
        request.body += hec_event(seal_epoch_ms(batch.seal_line), host, batch.seal_line) + '\n';
      return {std::move(request)};
    }
    case HttpShape::kDatadog:
      return datadog_bodies(batch, host);
  }
  return {};
}

struct HttpSink::Handle {
  CURL* curl = nullptr;
  ~Handle() { curl_easy_cleanup(curl); }
};

HttpSink::HttpSink(HttpSinkOptions options, audit_export::SinkContext context)
    : options_(std::move(options)), context_(std::move(context)) {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  where_ = "http sink " + options_.url.substr(0, options_.url.find_first_of("?#"));
}

HttpSink::~HttpSink() = default;

void HttpSink::deliver(const ExportBatch& batch) {
  try {
    for (const auto& request : http_request_bodies(options_.shape, batch, context_.host)) post(request);
  } catch (const SinkError&) {
    throw;
  } catch (const std::exception& e) {  // out of memory and the like: still a batch to try again
    handle_.reset();
    throw SinkError(where_ + ": " + e.what());
  }
}

void HttpSink::close() { handle_.reset(); }

void HttpSink::post(const HttpRequestBody& request) {
  if (!handle_) {
    auto handle = std::make_unique<Handle>();
    handle->curl = curl_easy_init();
    if (!handle->curl) throw SinkError(where_ + ": curl_easy_init failed");
    CURL* c = handle->curl;
    const long timeout = static_cast<long>(options_.timeout.count());
    curl_easy_setopt(c, CURLOPT_URL, options_.url.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "zerod-audit");
    // The URL is where the audit goes: never through a proxy named by the
    // environment (http_proxy, ...), which would see every record.
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    // Redirects are not followed (libcurl's default): a receiver that moved
    // answers 3xx, an error the operator sees, rather than the audit and its
    // token going wherever a Location header says.
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    if (!options_.ca_file.empty()) {
      curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
      curl_easy_setopt(c, CURLOPT_CAPATH,
                       static_cast<char*>(nullptr));  // only these CAs, not the system's directory too
    }
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    handle_ = std::move(handle);
  }
  CURL* c = handle_->curl;

  HeaderList headers;
  headers.add("Content-Type: " + request.content_type);
  headers.add("Expect:");  // no 100-continue round trip (and wait) before large bodies
  if (!options_.token.empty()) {
    const char* scheme = options_.shape == HttpShape::kSplunkHec ? "Authorization: Splunk "
                         : options_.shape == HttpShape::kDatadog ? "DD-API-KEY: "
                                                                 : "Authorization: Bearer ";
    options_.token.reveal([&](std::string_view token) {
      std::string header;  // sized once: no reallocation leaves a copy of the token behind unwiped
      header.reserve(std::strlen(scheme) + token.size());
      header.append(scheme).append(token);
      headers.add(std::move(header));
    });
  }
  Response response;
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(c);
  // Nothing of this request may outlive it in the handle kept for the next.
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, nullptr);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, nullptr);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, nullptr);

  if (rc != CURLE_OK) {
    handle_.reset();  // start from a new connection next time
    throw SinkError(where_ + ": " + curl_easy_strerror(rc) + (error[0] ? std::string(": ") + error : ""));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) return;
  std::string what = where_ + ": HTTP " + std::to_string(status);
  if (const std::string said = excerpt(response.body, options_.token); !said.empty()) what += ": " + said;
  const bool busy = status == 429 || status == 503;
  throw SinkError(what, busy ? response.retry_after : std::nullopt);
}

}  // namespace zn::broker::audit_sinks
