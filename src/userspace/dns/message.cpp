#include "userspace/dns/message.h"

#include "userspace/dns/ldns.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace zn::dns {

void PktDeleter::operator()(ldns_struct_pkt* p) const { ldns_pkt_free(p); }

namespace {

struct RdfDeleter {
  void operator()(ldns_rdf* r) const { ldns_rdf_deep_free(r); }
};
using RdfPtr = std::unique_ptr<ldns_rdf, RdfDeleter>;

Bytes encode(const ldns_pkt* pkt) {
  uint8_t* wire = nullptr;
  size_t size = 0;
  if (ldns_pkt2wire(&wire, pkt, &size) != LDNS_STATUS_OK || !wire) {
    std::free(wire);
    return {};
  }
  Bytes out(wire, wire + size);
  std::free(wire);
  return out;
}

PktPtr new_reply_header(uint16_t id, bool rd, ldns_pkt_rcode rcode) {
  PktPtr p(ldns_pkt_new());
  if (!p) return p;
  ldns_pkt_set_id(p.get(), id);
  ldns_pkt_set_qr(p.get(), true);
  ldns_pkt_set_opcode(p.get(), LDNS_PACKET_QUERY);
  ldns_pkt_set_rd(p.get(), rd);
  ldns_pkt_set_ra(p.get(), true);
  ldns_pkt_set_rcode(p.get(), static_cast<uint8_t>(rcode));
  return p;
}

// An error answer that echoes nothing but the ID (the question is not trusted).
Bytes header_only_reply(uint16_t id, bool rd, ldns_pkt_rcode rcode) {
  PktPtr p = new_reply_header(id, rd, rcode);
  return p ? encode(p.get()) : Bytes{};
}

std::string presentation_name(const ldns_rdf* owner) {
  RdfPtr copy(ldns_rdf_clone(owner));
  if (!copy) return {};
  ldns_dname2canonical(copy.get());  // lowercase
  char* text = ldns_rdf2str(copy.get());
  if (!text) return {};
  std::string name(text);
  std::free(text);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!name.empty() && name.back() == '.') name.pop_back();
  return name;
}

}  // namespace

const char* problem_name(Problem p) {
  switch (p) {
    case Problem::TooShort:
      return "too short";
    case Problem::Oversize:
      return "oversize";
    case Problem::IsResponse:
      return "QR set";
    case Problem::Unparseable:
      return "unparseable";
    case Problem::QuestionCount:
      return "question count";
    case Problem::Opcode:
      return "opcode";
    case Problem::Class:
      return "class";
  }
  return "?";
}

bool is_malformed(Problem p) { return p != Problem::Opcode && p != Problem::Class; }

std::variant<Query, Rejection> parse_query(std::span<const uint8_t> wire) {
  if (wire.size() < LDNS_HEADER_SIZE) return Rejection{Problem::TooShort, {}};
  if (wire.size() > kMaxQuerySize) return Rejection{Problem::Oversize, {}};
  if (LDNS_QR_WIRE(wire.data())) return Rejection{Problem::IsResponse, {}};
  const uint16_t id = LDNS_ID_WIRE(wire.data());
  const bool rd = LDNS_RD_WIRE(wire.data()) != 0;

  ldns_pkt* raw = nullptr;
  if (ldns_wire2pkt(&raw, wire.data(), wire.size()) != LDNS_STATUS_OK || !raw) {
    if (raw) ldns_pkt_free(raw);
    return Rejection{Problem::Unparseable, header_only_reply(id, rd, LDNS_RCODE_FORMERR)};
  }
  PktPtr pkt(raw);
  if (ldns_pkt_get_opcode(pkt.get()) != LDNS_PACKET_QUERY)
    return Rejection{Problem::Opcode, header_only_reply(id, rd, LDNS_RCODE_NOTIMPL)};
  const ldns_rr_list* questions = ldns_pkt_question(pkt.get());
  if (ldns_pkt_qdcount(pkt.get()) != 1 || !questions || ldns_rr_list_rr_count(questions) != 1)
    return Rejection{Problem::QuestionCount, header_only_reply(id, rd, LDNS_RCODE_FORMERR)};
  const ldns_rr* q = ldns_rr_list_rr(questions, 0);
  if (!q || !ldns_rr_owner(q))
    return Rejection{Problem::Unparseable, header_only_reply(id, rd, LDNS_RCODE_FORMERR)};

  Query query;
  query.id = id;
  query.qtype = static_cast<uint16_t>(ldns_rr_get_type(q));
  query.qname = presentation_name(ldns_rr_owner(q));
  query.edns = ldns_pkt_edns(pkt.get());
  if (query.edns) query.udp_size = std::max<uint16_t>(512, ldns_pkt_edns_udp_size(pkt.get()));
  const bool class_in = ldns_rr_get_class(q) == LDNS_RR_CLASS_IN;
  query.pkt = std::move(pkt);
  if (!class_in) {
    Rejection r{Problem::Class, build_reply(query, Rcode::NotImp, {}, 0, udp_reply_limit(query))};
    return r;
  }
  return query;
}

size_t udp_reply_limit(const Query& q) {
  return q.edns ? std::min<size_t>(q.udp_size, kMaxEdnsUdpReply) : 512;
}

Bytes build_reply(const Query& q, Rcode rcode, const std::vector<net::IpAddress>& addresses, uint32_t ttl,
                  size_t max_size) {
  const bool rd = q.pkt && ldns_pkt_rd(q.pkt.get());
  auto build = [&](bool with_answers) -> Bytes {
    PktPtr p = new_reply_header(q.id, rd, static_cast<ldns_pkt_rcode>(rcode));
    if (!p) return {};
    const ldns_rr* question = q.pkt ? ldns_rr_list_rr(ldns_pkt_question(q.pkt.get()), 0) : nullptr;
    if (question) {
      ldns_rr* copy = ldns_rr_clone(question);
      if (!copy) return {};
      ldns_rr_set_question(copy, true);
      ldns_pkt_push_rr(p.get(), LDNS_SECTION_QUESTION, copy);
    }
    if (with_answers && question && rcode == Rcode::NoError) {
      for (const auto& a : addresses) {
        const bool v4 = a.family == AF_INET;
        if ((v4 && q.qtype != LDNS_RR_TYPE_A) || (!v4 && q.qtype != LDNS_RR_TYPE_AAAA)) continue;
        ldns_rr* rr = ldns_rr_new();
        if (!rr) return {};
        ldns_rr_set_owner(rr, ldns_rdf_clone(ldns_rr_owner(question)));
        ldns_rr_set_type(rr, v4 ? LDNS_RR_TYPE_A : LDNS_RR_TYPE_AAAA);
        ldns_rr_set_class(rr, LDNS_RR_CLASS_IN);
        ldns_rr_set_ttl(rr, ttl);
        ldns_rr_push_rdf(
            rr, ldns_rdf_new_frm_data(v4 ? LDNS_RDF_TYPE_A : LDNS_RDF_TYPE_AAAA, a.size(), a.bytes.data()));
        ldns_pkt_push_rr(p.get(), LDNS_SECTION_ANSWER, rr);
      }
    }
    if (q.edns) {
      ldns_pkt_set_edns_udp_size(p.get(), kMaxEdnsUdpReply);
      ldns_pkt_set_edns_version(p.get(), 0);
    }
    if (!with_answers) ldns_pkt_set_tc(p.get(), true);
    return encode(p.get());
  };
  Bytes out = build(true);
  if (out.size() > max_size) out = build(false);
  return out;
}

}  // namespace zn::dns
