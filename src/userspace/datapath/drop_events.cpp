#include "userspace/datapath/drop_events.h"

#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "userspace/datapath/verdict_names.h"

namespace zn::dp {
namespace {

std::string endpoint(uint8_t family, const uint8_t* addr, uint16_t port_be, bool with_port) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family == 6 ? AF_INET6 : AF_INET, addr, buf, sizeof(buf));
  std::string host = family == 6 && with_port ? "[" + std::string(buf) + "]" : std::string(buf);
  return with_port ? host + ":" + std::to_string(ntohs(port_be)) : host;
}

std::string protocol_name(uint8_t proto) {
  switch (proto) {
    case IPPROTO_TCP:
      return "tcp";
    case IPPROTO_UDP:
      return "udp";
    case IPPROTO_ICMP:
      return "icmp";
    case IPPROTO_ICMPV6:
      return "icmpv6";
    default:
      return "proto " + std::to_string(proto);
  }
}

}  // namespace

std::string format_drop_event(const zn_drop_event& e) {
  std::string out(verdict_name(e.reason));
  out += e.direction == 0 ? " in " : " out ";
  if (e.family == 4 || e.family == 6) {
    const bool ports = e.proto == IPPROTO_TCP || e.proto == IPPROTO_UDP;
    out += protocol_name(e.proto) + " " + endpoint(e.family, e.saddr, e.sport, ports) + " -> " +
           endpoint(e.family, e.daddr, e.dport, ports);
  } else {
    char type[16];
    std::snprintf(type, sizeof(type), "0x%04x", ntohs(e.ethertype));
    out += std::string("ethertype ") + type;
    if (ntohs(e.ethertype) == 0x0806)
      out += " " + endpoint(4, e.saddr, 0, false) + " -> " + endpoint(4, e.daddr, 0, false);
  }
  out += " session " + std::to_string(e.session_idx) + " ifindex " + std::to_string(e.ifindex);
  return out;
}

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
