#include "userspace/drop_events.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace zn::dp {

DropEventReader::DropEventReader(int ringbuf_fd, Handler handler) : handler_(std::move(handler)) {
  rb_ = ring_buffer__new(ringbuf_fd, &DropEventReader::on_record, this, nullptr);
  if (!rb_) throw std::runtime_error(std::string("ring_buffer__new: ") + std::strerror(errno));
}

DropEventReader::~DropEventReader() { ring_buffer__free(rb_); }

int DropEventReader::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<DropEventReader*>(ctx);
  if (size < sizeof(zn_drop_event)) {
    ++self->malformed_;
    return 0;
  }
  zn_drop_event event;
  std::memcpy(&event, data, sizeof(event));
  self->handler_(event);
  return 0;
}

int DropEventReader::poll(int timeout_ms) {
  int n = ring_buffer__poll(rb_, timeout_ms);
  if (n < 0 && n != -EINTR) throw std::runtime_error("ring_buffer__poll: " + std::to_string(n));
  return n < 0 ? 0 : n;
}

int DropEventReader::drain() {
  int n = ring_buffer__consume(rb_);
  if (n < 0) throw std::runtime_error("ring_buffer__consume: " + std::to_string(n));
  return n;
}

int DropEventReader::epoll_fd() const { return ring_buffer__epoll_fd(rb_); }

}  // namespace zn::dp
