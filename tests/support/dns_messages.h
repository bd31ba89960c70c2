// Crafting queries and reading replies with ldns, a recording policy, and
// small socket clients for the DNS tests.
#pragma once

#include "userspace/dns/ldns.h"
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "userspace/dns/message.h"
#include "userspace/dns/policy.h"

namespace zn::dns::test {

struct QueryOptions {
  ldns_rr_type type = LDNS_RR_TYPE_A;
  ldns_rr_class klass = LDNS_RR_CLASS_IN;
  uint16_t id = 0x1234;
  bool edns = false;
  uint16_t edns_size = 1232;
};
Bytes make_query(const std::string& name, QueryOptions o = {});
// Parses wire with ldns and hands the packet to edit, then re-encodes it.
Bytes edit_query(const std::string& name, const std::function<void(ldns_pkt*)>& edit, QueryOptions o = {});

struct Reply {
  uint16_t id = 0;
  bool qr = false, tc = false, rd = false, ra = false;
  int rcode = -1;
  size_t qdcount = 0;
  std::string qname;                   // as echoed, presentation form
  std::vector<std::string> addresses;  // A / AAAA rdata in the answer section
  std::vector<uint32_t> ttls;
  bool edns = false;
};
std::optional<Reply> parse_reply(const Bytes& wire);

// Allows names equal to or under the allowed suffixes; knows sources by
// address (any source if sessions is empty).
class RecordingPolicy : public DnsPolicy {
 public:
  struct Answer {
    std::string session, qname;
    std::vector<zn::net::IpAddress> addresses;
    uint32_t ttl;
  };
  struct Denial {
    std::string session, qname, reason;
  };
  struct Unanswered {
    std::string session, qname;
    NoAnswer why;
    bool forwarded;
  };

  std::vector<std::string> allowed_suffixes{"allowed.test"};
  std::vector<std::pair<std::string, std::string>> sessions;  // source ip -> session; empty: "s1"
  // Names answered by the host itself (DnsDecision::local_answers).
  std::map<std::string, std::vector<zn::net::IpAddress>> local;

  std::optional<DnsSession> session_of(const sockaddr_storage& guest_source) const override;
  DnsDecision decide(const DnsSession& session, const std::string& qname) const override;
  void on_answer(const DnsSession& session, const std::string& qname,
                 const std::vector<zn::net::IpAddress>& addresses, uint32_t ttl) override;
  void on_denied(const DnsSession& session, const std::string& qname, const std::string& reason) override;
  void on_unanswered(const DnsSession& session, const std::string& qname, NoAnswer why,
                     bool forwarded) override;

  std::vector<Answer> answers() const;
  std::vector<Denial> denials() const;
  std::vector<Unanswered> unanswered() const;
  std::vector<std::string> decided() const;  // qnames passed to decide()

 private:
  mutable std::mutex mutex_;
  std::vector<Answer> answers_;
  std::vector<Denial> denials_;
  std::vector<Unanswered> unanswered_;
  mutable std::vector<std::string> decided_;
};

// One UDP exchange; nullopt on timeout.
std::optional<Bytes> udp_exchange(const sockaddr_storage& server, const Bytes& query,
                                  std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
// Reads one length-prefixed message from a connected TCP socket.
std::optional<Bytes> tcp_read_message(int fd, std::chrono::milliseconds timeout);
// Waits until the peer closes fd (read returns 0 or error); false on timeout.
bool wait_closed(int fd, std::chrono::milliseconds timeout);
// Blocking connect, from `source` (an address of this host) if given; throws.
int tcp_connect(const sockaddr_storage& server, const std::string& source = "");
bool send_all(int fd, const uint8_t* data, size_t size);
Bytes tcp_frame(const Bytes& msg);
// The header of q followed by a question whose name points at itself.
Bytes compression_loop(const Bytes& q);

}  // namespace zn::dns::test
