// Consuming the datapath's drop events from its ring buffer.
#pragma once

#include <functional>
#include <string>

#include "zn_abi.h"

struct ring_buffer;

namespace zn::dp {

// One line: "drop:tcp_port in tcp 198.19.0.2:40000 -> 198.18.0.10:22 session 1 ifindex 4".
std::string format_drop_event(const zn_drop_event& event);

class DropEventReader {
 public:
  using Handler = std::function<void(const zn_drop_event&)>;
  DropEventReader(int ringbuf_fd, Handler handler);  // throws
  ~DropEventReader();
  DropEventReader(const DropEventReader&) = delete;
  DropEventReader& operator=(const DropEventReader&) = delete;

  // Waits up to timeout_ms and hands every available event to the handler.
  // Returns how many were handled.
  int poll(int timeout_ms);
  // Hands over what is there now without waiting.
  int drain();
  // An epoll fd that becomes readable when events wait, for event loops.
  int epoll_fd() const;
  // Records too short to be an event (never expected; counted, not trusted).
  unsigned long malformed() const { return malformed_; }

 private:
  static int on_record(void* ctx, void* data, size_t size);
  struct ring_buffer* rb_ = nullptr;
  Handler handler_;
  unsigned long malformed_ = 0;
};

}  // namespace zn::dp
