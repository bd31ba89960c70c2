#include "userspace/ingress/ticket_carrier.h"

#include <gtest/gtest.h>

namespace zn::ingress {
namespace {

Admission admit(const std::string& head_text, uint16_t port = 8080) {
  http::RequestHead head;
  const http::ParseResult r = http::parse_request_head(head_text, http::HttpLimits{}, head);
  EXPECT_EQ(r.state, http::ParseState::kDone) << head_text;
  return take_admission(head, port);
}

constexpr const char* kT = "znt_abcdefghijklmnopqrstuvwxyz234567";

TEST(TicketCarrier, HeaderIsTakenOutAndTheRestKeptInOrder) {
  const Admission a = admit(std::string("POST /x?y=1 HTTP/1.1\r\nHost: h\r\nzn-TICKET: ") + kT +
                            "\r\nContent-Length: 2\r\n\r\n");
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.ticket, kT);
  EXPECT_EQ(a.forwarded_head, "POST /x?y=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n");
}

TEST(TicketCarrier, QueryParameterInAnyEncodingOfItsName) {
  for (const std::string name : {"zn_ticket", "%7An_ticket", "zn%5Fticket", "%7a%6e%5f%74icket"}) {
    const Admission a = admit("GET /q?a=1&" + name + "=" + kT + "&b=%20 HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(a.error, "") << name;
    EXPECT_EQ(a.ticket, kT) << name;
    EXPECT_EQ(a.forwarded_head, "GET /q?a=1&b=%20 HTTP/1.1\r\nHost: h\r\n\r\n") << name;
  }
  // The only parameter: the query goes with it.
  EXPECT_EQ(admit(std::string("GET /q?zn_ticket=") + kT + " HTTP/1.1\r\nHost: h\r\n\r\n").forwarded_head,
            "GET /q HTTP/1.1\r\nHost: h\r\n\r\n");
  // A value is decoded as the server would.
  EXPECT_EQ(admit("GET /?zn_ticket=znt%5Fx HTTP/1.1\r\nHost: h\r\n\r\n").ticket, "znt_x");
}

TEST(TicketCarrier, PathPrefix) {
  EXPECT_EQ(admit(std::string("GET /_zn/") + kT + "/a/b?c HTTP/1.1\r\nHost: h\r\n\r\n").forwarded_head,
            "GET /a/b?c HTTP/1.1\r\nHost: h\r\n\r\n");
  const Admission bare = admit(std::string("GET /_zn/") + kT + " HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(bare.ticket, kT);
  EXPECT_EQ(bare.forwarded_head, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  // Only at the start of the path.
  EXPECT_FALSE(admit(std::string("GET /a/_zn/") + kT + " HTTP/1.1\r\nHost: h\r\n\r\n").ticket);
}

TEST(TicketCarrier, AmbiguityIsAnError) {
  const std::string t = kT;
  for (const std::string& head :
       {"GET /?zn_ticket=" + t + " HTTP/1.1\r\nHost: h\r\nZn-Ticket: " + t + "\r\n\r\n",
        "GET /_zn/" + t + "/?zn_ticket=" + t + " HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /?zn_ticket=" + t + "&zn_ticket=" + t + " HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nZn-Ticket: " + t + "\r\nZN-TICKET: other\r\n\r\n",
        std::string("GET /_zn//x HTTP/1.1\r\nHost: h\r\n\r\n"),
        std::string("GET /?zn_ticket= HTTP/1.1\r\nHost: h\r\n\r\n"),
        std::string("GET /?zn_ticket HTTP/1.1\r\nHost: h\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\nHost: h\r\nCookie: zn_ingress_8080=a; zn_ingress_8080=b\r\n\r\n")})
    EXPECT_NE(admit(head).error, "") << head;
}

TEST(TicketCarrier, TheBindingCookieOfThisPortIsTakenOthersPassOn) {
  const Admission a = admit(
      "GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1; zn_ingress_8080=znb_x ; zn_ingress_8081=znb_y\r\nCookie: "
      "b=2\r\n\r\n");
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.binding, "znb_x");
  EXPECT_FALSE(a.ticket);
  EXPECT_EQ(a.forwarded_head,
            "GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1; zn_ingress_8081=znb_y\r\nCookie: b=2\r\n\r\n");
  // A Cookie header holding only the binding goes altogether.
  EXPECT_EQ(admit("GET / HTTP/1.1\r\nHost: h\r\nCookie: zn_ingress_8080=znb_x\r\n\r\n").forwarded_head,
            "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
}

TEST(TicketCarrier, NothingCarriedIsNoError) {
  const Admission a = admit("GET /plain HTTP/1.0\r\n\r\n");
  EXPECT_EQ(a.error, "");
  EXPECT_FALSE(a.ticket);
  EXPECT_FALSE(a.binding);
  EXPECT_EQ(a.forwarded_head, "GET /plain HTTP/1.0\r\n\r\n");
}

}  // namespace
}  // namespace zn::ingress
