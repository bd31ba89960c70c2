// What became of the streams the peer opened, so that a frame arriving on
// one after it closed gets RFC 9113 5.1's answer. nghttp2 forgets a stream
// once it closes (no_closed_streams) and then ignores whatever arrives on
// it, which is right only for a stream we reset: a HEADERS on a stream
// the peer ended or reset is a STREAM_CLOSED error, and a HEADERS on a
// lower id than the last one the peer opened is a PROTOCOL_ERROR
// (5.1.1: new ids only grow).
//
// Bounded: the newest `remembered` streams are kept (ids only grow, so
// they stay in order). A frame on an id older than those is ignored, as
// nghttp2 would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace zn::h2 {

class PeerStreams {
 public:
  // What a frame other than PRIORITY, WINDOW_UPDATE or RST_STREAM on a
  // stream no longer open deserves.
  enum class Answer {
    ignore,         // we reset it (5.1: its frames may still be in flight), or too old to know
    stream_closed,  // the peer ended or reset it: STREAM_CLOSED
    never_opened,   // an id below the last one opened, never used: PROTOCOL_ERROR
  };

  explicit PeerStreams(size_t remembered = 1024) : remembered_(remembered) {}

  // The highest stream id the peer opened (0: none yet).
  uint32_t last() const { return last_; }
  // The peer opened `id` (greater than last()).
  void opened(uint32_t id);
  // The peer sent END_STREAM on `id`; RST_STREAM.
  void peer_ended(uint32_t id) { mark(id, kPeerEnded); }
  void peer_reset(uint32_t id) { mark(id, kPeerReset); }
  // We sent RST_STREAM on `id`.
  void local_reset(uint32_t id) { mark(id, kLocalReset); }

  // For `id` <= last(), a stream that is not open.
  Answer closed(uint32_t id) const;

 private:
  static constexpr uint8_t kPeerEnded = 1, kPeerReset = 2, kLocalReset = 4;
  struct Entry {
    uint32_t id;
    uint8_t flags;
  };
  Entry* find(uint32_t id);
  const Entry* find(uint32_t id) const;
  void mark(uint32_t id, uint8_t flag) {
    if (Entry* e = find(id)) e->flags |= flag;
  }

  size_t remembered_;
  std::deque<Entry> entries_;  // ascending ids
  uint32_t last_ = 0;
  uint32_t forgotten_ = 0;  // the highest id dropped from entries_
};

}  // namespace zn::h2
