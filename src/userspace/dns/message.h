// DNS wire format through ldns: parsing a guest's query and building the
// responder's replies. Nothing here trusts the input or throws on it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "userspace/dns/resolver.h"

struct ldns_struct_pkt;

namespace zn::dns {

using Bytes = std::vector<uint8_t>;

// Largest query accepted over UDP or TCP; bigger ones are malformed.
inline constexpr size_t kMaxQuerySize = 4096;
// Largest UDP reply sent to an EDNS client (the DNS flag day value).
inline constexpr uint16_t kMaxEdnsUdpReply = 1232;

struct PktDeleter {
  void operator()(ldns_struct_pkt* p) const;
};
using PktPtr = std::unique_ptr<ldns_struct_pkt, PktDeleter>;

// A well-formed query: one question, class IN, opcode QUERY, QR clear.
struct Query {
  PktPtr pkt;  // the parsed packet (its question is echoed in replies)
  uint16_t id = 0;
  uint16_t qtype = 0;  // LDNS_RR_TYPE_*
  std::string qname;   // lowercase, no trailing dot, ldns presentation form
  bool edns = false;
  uint16_t udp_size = 512;  // the client's advertised UDP size (512 without EDNS)
};

enum class Problem {
  TooShort,       // shorter than a header: dropped
  Oversize,       // longer than kMaxQuerySize: dropped
  IsResponse,     // QR set: dropped (never answer answers)
  Unparseable,    // ldns rejected it (truncation, garbage, compression loops): FORMERR
  QuestionCount,  // zero or several questions: FORMERR
  Opcode,         // not QUERY: NOTIMP
  Class,          // not IN: NOTIMP
};
const char* problem_name(Problem p);
// Malformed problems count as malformed; Opcode/Class as unsupported.
bool is_malformed(Problem p);

struct Rejection {
  Problem problem;
  Bytes reply;  // empty: drop silently
};

std::variant<Query, Rejection> parse_query(std::span<const uint8_t> wire);

// A reply to a parsed query. answer_type A or AAAA with addresses of that
// family; rcode NoError with no addresses is NODATA. If the encoded reply
// exceeds max_size it is replaced by an empty one with TC set.
Bytes build_reply(const Query& q, Rcode rcode, const std::vector<net::IpAddress>& addresses, uint32_t ttl,
                  size_t max_size);

// Largest reply for this query over UDP (512, or its EDNS size up to kMaxEdnsUdpReply).
size_t udp_reply_limit(const Query& q);

}  // namespace zn::dns
