#include "broker/audit_sinks/nats_reader.h"

#include <algorithm>
#include <memory>

#include "broker/audit_sinks/nats_connection.h"
#include "broker/audit_sinks/nats_sink.h"

namespace zn::broker::audit_sinks {
namespace {

using Clock = std::chrono::steady_clock;

struct SubscriptionDeleter {
  void operator()(natsSubscription* sub) const {
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
  }
};
struct MsgDeleter {
  void operator()(natsMsg* m) const { natsMsg_Destroy(m); }
};
struct MetaDeleter {
  void operator()(jsMsgMetaData* m) const { jsMsgMetaData_Destroy(m); }
};
struct ConsumerInfoDeleter {
  void operator()(jsConsumerInfo* ci) const { jsConsumerInfo_Destroy(ci); }
};

// The last sequence the stream holds now (0 when empty).
uint64_t stream_last_seq(const NatsConnection& conn, const std::string& stream, int64_t wait_ms) {
  jsOptions opts;
  jsOptions_Init(&opts);
  opts.Wait = wait_ms;
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&info, conn.jetstream(), stream.c_str(), &opts, &code);
  if (s == NATS_NOT_FOUND) throw NatsError("stream " + stream + " does not exist");
  if (s != NATS_OK) throw NatsError(nats_failure("stream " + stream + ": info", s, code));
  const uint64_t last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  return last;
}

}  // namespace

std::vector<std::string> read_nats_audit(const NatsReadOptions& options) {
  const Clock::time_point deadline = Clock::now() + options.timeout;
  // What is left of the read's time, at least 1 ms (libnats reads 0 as "none").
  auto left_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max<int64_t>(1, left.count());
  };

  NatsConnection conn(NatsEndpoint{options.url, options.ca_file, options.creds_file, options.timeout});
  const uint64_t last = stream_last_seq(conn, options.stream, left_ms());
  if (last == 0) return {};

  const std::string filter = nats_host_subject(options.subject_prefix, options.host) + ".>";
  jsOptions js_opts;
  jsOptions_Init(&js_opts);
  js_opts.Wait = left_ms();
  jsSubOptions sub_opts;
  jsSubOptions_Init(&sub_opts);
  sub_opts.Stream = options.stream.c_str();
  sub_opts.Ordered = true;
  sub_opts.Config.DeliverPolicy = js_DeliverAll;
  natsSubscription* raw_sub = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_SubscribeSync(&raw_sub, conn.jetstream(), filter.c_str(), &js_opts, &sub_opts, &code);
  if (s != NATS_OK) throw NatsError(nats_failure("subscribe " + filter, s, code));
  std::unique_ptr<natsSubscription, SubscriptionDeleter> sub(raw_sub);

  // Nothing for this host at all: no message would ever come. (The
  // consumer's delivered count, not its stream position: that starts at the
  // stream's first sequence less one, not at 0.)
  {
    jsConsumerInfo* raw_info = nullptr;
    js_opts.Wait = left_ms();
    code = static_cast<jsErrCode>(0);
    s = natsSubscription_GetConsumerInfo(&raw_info, sub.get(), &js_opts, &code);
    if (s != NATS_OK) throw NatsError(nats_failure("consumer info for " + filter, s, code));
    std::unique_ptr<jsConsumerInfo, ConsumerInfoDeleter> info(raw_info);
    if (info->Delivered.Consumer == 0 && info->NumPending == 0) return {};
  }

  std::vector<std::string> lines;
  for (;;) {
    natsMsg* raw_msg = nullptr;
    s = natsSubscription_NextMsg(&raw_msg, sub.get(), left_ms());
    if (s == NATS_TIMEOUT)
      throw NatsError("reading " + filter + " from stream " + options.stream + ": timed out after " +
                      std::to_string(lines.size()) + " messages");
    if (s != NATS_OK) throw NatsError(nats_failure("reading " + filter, s));
    std::unique_ptr<natsMsg, MsgDeleter> msg(raw_msg);
    jsMsgMetaData* raw_meta = nullptr;
    s = natsMsg_GetMetaData(&raw_meta, msg.get());
    if (s != NATS_OK) throw NatsError(nats_failure("message metadata on " + filter, s));
    std::unique_ptr<jsMsgMetaData, MetaDeleter> meta(raw_meta);
    // Stored after the read started: the next read's.
    if (meta->Sequence.Stream > last) break;
    lines.emplace_back(natsMsg_GetData(msg.get()), static_cast<size_t>(natsMsg_GetDataLength(msg.get())));
    // NumPending: this host's messages after this one when it was sent.
    if (meta->Sequence.Stream == last || meta->NumPending == 0) break;
  }
  return lines;
}

}  // namespace zn::broker::audit_sinks
