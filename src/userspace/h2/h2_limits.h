// The bounds an HTTP/2 connection is held to, on both sides of the proxy
// (RFC 9113 10.5: an endpoint limits what a peer can make it hold or do).
//
// Each bound has a name (ZN_H2_LIMITS) that the counters, the LimitTripped
// events and the audit all use, so a metric and an audit line about the same
// limit cannot spell it differently.
//
// Rates are counted in fixed windows (flood_guard.h): a peer may send up to
// 2x a bound across a window boundary, which is still far below what the
// attacks these close need (thousands of frames per second).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

// X(field, name, help). `name` is what counters and audit records carry.
#define ZN_H2_LIMITS(X)                                                                                    \
  X(concurrent_streams, "concurrent_streams", "streams refused over SETTINGS_MAX_CONCURRENT_STREAMS")      \
  X(header_list_size, "header_list_size", "header blocks over SETTINGS_MAX_HEADER_LIST_SIZE")              \
  X(continuation_frames, "continuation_frames", "header blocks split into too many CONTINUATION frames")   \
  X(frame_size, "frame_size", "frames larger than SETTINGS_MAX_FRAME_SIZE")                                \
  X(settings_entries, "settings_entries", "SETTINGS frames with too many entries")                         \
  X(queued_acks, "queued_acks", "SETTINGS/PING acknowledgements piling up unsent")                         \
  X(peer_resets, "peer_resets", "RST_STREAM frames from the peer over the rate (rapid reset)")             \
  X(settings_frames, "settings_frames", "SETTINGS frames over the rate")                                   \
  X(ping_frames, "ping_frames", "PING frames over the rate")                                               \
  X(small_window_updates, "small_window_updates", "WINDOW_UPDATEs granting almost nothing, over the rate") \
  X(invalid_window_updates, "invalid_window_updates", "WINDOW_UPDATEs of zero or overflowing 2^31-1")      \
  X(empty_data_frames, "empty_data_frames", "DATA frames without payload or END_STREAM, over the rate")    \
  X(decoded_header_bytes, "decoded_header_bytes", "header bytes decoded from HPACK, over the rate")        \
  X(header_list_refusals, "header_list_refusals", "header lists refused for their size, over the rate")

namespace zn::h2 {

// At most `events` in any one `window`.
struct RateBound {
  uint32_t events = 0;
  std::chrono::milliseconds window{1000};
};

struct H2Limits {
  // Advertised in SETTINGS. A stream over it is refused (REFUSED_STREAM)
  // while our SETTINGS are unacknowledged; a peer that exceeds the limit it
  // acknowledged is hostile and the connection is closed (nghttp2's rule).
  uint32_t max_concurrent_streams = 100;
  // RFC 9113 6.5.2: the sum of name + value + 32 over a header block. A
  // request over it is answered 431; a response over it resets that stream.
  uint32_t max_header_list_bytes = 64 * 1024;
  // Both HPACK tables: the decoder's (advertised, enforced by nghttp2) and
  // the encoder's, whatever table size the peer offers.
  uint32_t hpack_table_bytes = 4096;
  // CONTINUATION frames after one HEADERS (CVE-2024-27316 pattern): a real
  // header block of 64 KiB needs at most 3 at the 16 KiB frame size.
  uint32_t max_continuations = 16;
  // Advertised SETTINGS_MAX_FRAME_SIZE (16384 is the protocol's minimum).
  uint32_t max_frame_bytes = 16384;
  uint32_t max_settings_entries = 32;
  // SETTINGS and PING ACKs nghttp2 holds because output is not being taken
  // (the peer does not read): past this the connection is closed.
  uint32_t max_queued_acks = 1000;
  // Rapid reset (CVE-2023-44487): a browser cancels streams on navigation,
  // a few tens per second at worst; the attack needs thousands. 200 per 10 s
  // lets bursts of cancellations through and stops the attack in its first
  // window, before it costs more than 200 stream setups.
  RateBound peer_resets{200, std::chrono::seconds(10)};
  // A peer sends one SETTINGS at the start and rarely another; PING is a
  // keepalive or an RTT/BDP probe (gRPC: at most a few per second).
  RateBound settings_frames{10, std::chrono::seconds(1)};
  RateBound ping_frames{20, std::chrono::seconds(1)};
  // WINDOW_UPDATEs granting under small_window_update_bytes: a receiver
  // that really consumes data grants half a window at a time; a trickle of
  // 1-byte grants makes the sender cut 1-byte DATA frames (data dribble).
  uint32_t small_window_update_bytes = 1024;
  RateBound small_window_updates{100, std::chrono::seconds(10)};
  // DATA frames carrying nothing and not ending the stream (CVE-2019-9518).
  RateBound empty_data_frames{100, std::chrono::seconds(10)};
  // HPACK lets one byte stand for a whole table entry: a 4 KiB field
  // referenced by 1-byte indices decodes to 4 KiB per byte of block (an
  // HPACK bomb), and each decoded field is validated before the header
  // list bound can stop keeping it, so a block is work however little of
  // it is kept. Counted as RFC 9113 6.5.2 sizes (name + value + 32) per
  // connection: 16 MiB in 10 s is 256 header lists at the 64 KiB bound,
  // where a browser sends a few KiB per request.
  RateBound decoded_header_bytes{16u << 20, std::chrono::seconds(10)};
  // Header lists over max_header_list_bytes (answered 431 or reset): a
  // client told once does not keep sending them.
  RateBound header_list_refusals{20, std::chrono::seconds(10)};
};

enum class Limit {
#define ZN_H2_ENUM_(field, name, help) field,
  ZN_H2_LIMITS(ZN_H2_ENUM_)
#undef ZN_H2_ENUM_
};

// How often each limit was reached on one connection. Plain values: the
// session is used from one thread, the caller copies them out.
struct H2Counters {
#define ZN_H2_FIELD_(field, name, help) uint64_t field = 0;
  ZN_H2_LIMITS(ZN_H2_FIELD_)
#undef ZN_H2_FIELD_

  uint64_t& at(Limit limit);
  uint64_t at(Limit limit) const;
};

std::string_view limit_name(Limit limit);
std::string_view limit_help(Limit limit);

// Calls f(Limit, name, help) for each limit, in declaration order.
template <typename F>
void for_each_limit(F&& f) {
#define ZN_H2_VISIT_(field, name, help) f(Limit::field, std::string_view(name), std::string_view(help));
  ZN_H2_LIMITS(ZN_H2_VISIT_)
#undef ZN_H2_VISIT_
}

}  // namespace zn::h2
