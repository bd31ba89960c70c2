#include "userspace/h2/peer_streams.h"

#include <algorithm>

namespace zn::h2 {

void PeerStreams::opened(uint32_t id) {
  if (id <= last_) return;
  last_ = id;
  entries_.push_back(Entry{id, 0});
  while (entries_.size() > remembered_) {
    forgotten_ = entries_.front().id;
    entries_.pop_front();
  }
}

const PeerStreams::Entry* PeerStreams::find(uint32_t id) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), id,
                             [](const Entry& e, uint32_t want) { return e.id < want; });
  return it != entries_.end() && it->id == id ? &*it : nullptr;
}

PeerStreams::Entry* PeerStreams::find(uint32_t id) {
  return const_cast<Entry*>(static_cast<const PeerStreams*>(this)->find(id));
}

PeerStreams::Answer PeerStreams::closed(uint32_t id) const {
  if (id <= forgotten_ || id > last_) return Answer::ignore;
  const Entry* e = find(id);
  if (e == nullptr) return Answer::never_opened;
  // Whatever we did, a peer that ended the stream itself knows it did:
  // anything more from it is its error. After our RST_STREAM, the peer's
  // frames may have crossed it on the wire: ignored (5.1, "closed").
  if (e->flags & kPeerEnded) return Answer::stream_closed;
  if (e->flags & kLocalReset) return Answer::ignore;
  if (e->flags & kPeerReset) return Answer::stream_closed;
  return Answer::ignore;
}

}  // namespace zn::h2
