// The maps of a datapath loaded by another process, opened by their pins:
// for inspection tools, which must never reload or replace the programs.
#pragma once

#include <string>

#include "userspace/datapath/maps.h"

namespace zn::dp {

class PinnedMaps {
 public:
  // Throws std::system_error naming the missing pin.
  static PinnedMaps open(const std::string& pin_root);
  PinnedMaps(PinnedMaps&& other) noexcept;
  PinnedMaps& operator=(PinnedMaps&&) = delete;
  PinnedMaps(const PinnedMaps&) = delete;
  ~PinnedMaps();

  DatapathMaps::Fds fds() const;
  int events_fd() const { return events_; }

 private:
  PinnedMaps() = default;
  int sessions_ = -1, listeners_ = -1, l4_allow_ = -1, l4_count_ = -1, counters_ = -1, event_buckets_ = -1,
      dns_buckets_ = -1, events_ = -1;
};

}  // namespace zn::dp
