#include "support/dns_messages.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <system_error>

#include "userspace/net/transparent_socket.h"

namespace zn::dns::test {
namespace {

bool readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (rc < 0 && errno == EINTR);
  return rc > 0;
}

std::string source_ip(const sockaddr_storage& ss) {
  std::string t = zn::net::endpoint_text(ss);
  // "1.2.3.4:53" / "[::1]:53" -> address only
  if (t.front() == '[') return t.substr(1, t.find(']') - 1);
  return t.substr(0, t.rfind(':'));
}

}  // namespace

Bytes edit_query(const std::string& name, const std::function<void(ldns_pkt*)>& edit, QueryOptions o) {
  ldns_rdf* dname = ldns_dname_new_frm_str(name.c_str());
  if (!dname) throw std::invalid_argument("bad name " + name);
  ldns_pkt* pkt = ldns_pkt_query_new(dname, o.type, o.klass, LDNS_RD);
  ldns_pkt_set_id(pkt, o.id);
  if (o.edns) ldns_pkt_set_edns_udp_size(pkt, o.edns_size);
  if (edit) edit(pkt);
  uint8_t* wire = nullptr;
  size_t size = 0;
  if (ldns_pkt2wire(&wire, pkt, &size) != LDNS_STATUS_OK) throw std::runtime_error("pkt2wire");
  Bytes out(wire, wire + size);
  std::free(wire);
  ldns_pkt_free(pkt);
  return out;
}

Bytes make_query(const std::string& name, QueryOptions o) { return edit_query(name, nullptr, o); }

std::optional<Reply> parse_reply(const Bytes& wire) {
  ldns_pkt* pkt = nullptr;
  if (ldns_wire2pkt(&pkt, wire.data(), wire.size()) != LDNS_STATUS_OK) return std::nullopt;
  Reply r;
  r.id = ldns_pkt_id(pkt);
  r.qr = ldns_pkt_qr(pkt);
  r.tc = ldns_pkt_tc(pkt);
  r.rd = ldns_pkt_rd(pkt);
  r.ra = ldns_pkt_ra(pkt);
  r.rcode = ldns_pkt_get_rcode(pkt);
  r.qdcount = ldns_pkt_qdcount(pkt);
  r.edns = ldns_pkt_edns(pkt);
  if (r.qdcount > 0) {
    char* s = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_question(pkt), 0)));
    r.qname = s;
    std::free(s);
  }
  const ldns_rr_list* an = ldns_pkt_answer(pkt);
  for (size_t i = 0; an && i < ldns_rr_list_rr_count(an); ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(an, i);
    char* s = ldns_rdf2str(ldns_rr_rdf(rr, 0));
    r.addresses.push_back(s);
    std::free(s);
    r.ttls.push_back(ldns_rr_ttl(rr));
  }
  ldns_pkt_free(pkt);
  return r;
}

std::optional<DnsSession> RecordingPolicy::session_of(const sockaddr_storage& src) const {
  if (sessions.empty()) return DnsSession{"s1", nullptr};
  const std::string ip = source_ip(src);
  for (const auto& [addr, sid] : sessions)
    if (addr == ip) return DnsSession{sid, nullptr};
  return std::nullopt;
}

DnsDecision RecordingPolicy::decide(const DnsSession&, const std::string& qname) const {
  {
    std::lock_guard lock(mutex_);
    decided_.push_back(qname);
  }
  if (auto l = local.find(qname); l != local.end()) return {true, "local", l->second};
  for (const auto& s : allowed_suffixes)
    if (qname == s || (qname.size() > s.size() && qname.ends_with("." + s))) return {true, "allow", {}};
  return {false, "default deny", {}};
}

void RecordingPolicy::on_answer(const DnsSession& session, const std::string& qname,
                                const std::vector<zn::net::IpAddress>& addresses, uint32_t ttl) {
  std::lock_guard lock(mutex_);
  answers_.push_back({session.id, qname, addresses, ttl});
}

void RecordingPolicy::on_denied(const DnsSession& session, const std::string& qname,
                                const std::string& reason) {
  std::lock_guard lock(mutex_);
  denials_.push_back({session.id, qname, reason});
}

void RecordingPolicy::on_unanswered(const DnsSession& session, const std::string& qname, NoAnswer why,
                                    bool forwarded) {
  std::lock_guard lock(mutex_);
  unanswered_.push_back({session.id, qname, why, forwarded});
}

std::vector<RecordingPolicy::Unanswered> RecordingPolicy::unanswered() const {
  std::lock_guard lock(mutex_);
  return unanswered_;
}

std::vector<RecordingPolicy::Answer> RecordingPolicy::answers() const {
  std::lock_guard lock(mutex_);
  return answers_;
}
std::vector<RecordingPolicy::Denial> RecordingPolicy::denials() const {
  std::lock_guard lock(mutex_);
  return denials_;
}
std::vector<std::string> RecordingPolicy::decided() const {
  std::lock_guard lock(mutex_);
  return decided_;
}

std::optional<Bytes> udp_exchange(const sockaddr_storage& server, const Bytes& query,
                                  std::chrono::milliseconds timeout) {
  int fd = ::socket(server.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  std::optional<Bytes> out;
  if (::sendto(fd, query.data(), query.size(), 0, reinterpret_cast<const sockaddr*>(&server),
               zn::net::endpoint_len(server)) == static_cast<ssize_t>(query.size()) &&
      readable(fd, timeout)) {
    Bytes buf(65536);
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n >= 0) {
      buf.resize(static_cast<size_t>(n));
      out = std::move(buf);
    }
  }
  ::close(fd);
  return out;
}

int tcp_connect(const sockaddr_storage& server, const std::string& source) {
  int fd = ::socket(server.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  if (!source.empty()) {
    const sockaddr_storage from = zn::net::make_endpoint(source, 0);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), zn::net::endpoint_len(from)) < 0) {
      int e = errno;
      ::close(fd);
      throw std::system_error(e, std::generic_category(), "bind " + source);
    }
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&server), zn::net::endpoint_len(server)) < 0) {
    int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "connect");
  }
  return fd;
}

bool send_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

Bytes tcp_frame(const Bytes& msg) {
  Bytes out(msg.size() + 2);
  out[0] = static_cast<uint8_t>(msg.size() >> 8);
  out[1] = static_cast<uint8_t>(msg.size() & 0xff);
  std::copy(msg.begin(), msg.end(), out.begin() + 2);
  return out;
}

Bytes compression_loop(const Bytes& q) {
  const uint8_t tail[] = {0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01};  // name -> offset 12, A, IN
  Bytes out(12 + sizeof(tail));
  std::copy(q.begin(), q.begin() + 12, out.begin());
  std::copy(std::begin(tail), std::end(tail), out.begin() + 12);
  return out;
}

std::optional<Bytes> tcp_read_message(int fd, std::chrono::milliseconds timeout) {
  auto read_exact = [&](uint8_t* p, size_t n) {
    while (n > 0) {
      if (!readable(fd, timeout)) return false;
      ssize_t r = ::recv(fd, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  };
  uint8_t prefix[2];
  if (!read_exact(prefix, 2)) return std::nullopt;
  Bytes msg((size_t{prefix[0]} << 8) | prefix[1]);
  if (!read_exact(msg.data(), msg.size())) return std::nullopt;
  return msg;
}

bool wait_closed(int fd, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !readable(fd, left)) return false;
    uint8_t buf[512];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
}

}  // namespace zn::dns::test
