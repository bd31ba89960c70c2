// The passthrough half of zerod's proxy, with real TLS upstreams in the
// stand-in internet and real curl in the guest: allowed hosts spliced to the
// upstream the broker chose (the guest sees the upstream's own certificate),
// nameless or unpinned connections reset.
#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

TEST_F(ProxyTest, AllowedHostIsSplicedToItsUpstreamWithItsOwnCertificate) {
  auto r = guest("curl -sv -m 5 --cacert " + p("ca.pem") + " https://registry.npmjs.org/ 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("<HTML>"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("issuer: CN=zeroness lab upstream CA"), std::string::npos) << r.output;
  const std::string events =
      egress_events({"egress:allow {\"bytes_down\"", "\"host\":\"registry.npmjs.org\""});
  EXPECT_NE(events.find("egress:allow {\"bytes_down\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"host\":\"registry.npmjs.org\""), std::string::npos) << events;
}

TEST_F(ProxyTest, SniOfAnAllowedHostSentToAnAttackersAddressReachesOnlyTheRealHost) {
  ASSERT_EQ(dig("registry.npmjs.org"), "198.18.0.12\n");
  // The guest connects to .13 (evil.example's server). Had the proxy gone
  // there, curl would have seen evil.example's certificate and failed.
  auto r = curl("--resolve registry.npmjs.org:443:198.18.0.13 https://registry.npmjs.org/");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("<HTML>"), std::string::npos);
}

TEST_F(ProxyTest, RawIpsAndUnresolvedNamesAreReset) {
  EXPECT_NE(guest("curl -sk -m 5 https://198.18.0.12/").exit_code, 0);  // no SNI
  // An allowed name the guest never resolved through us: not pinned.
  EXPECT_NE(curl("--resolve other.npmjs.org:443:198.18.0.12 https://other.npmjs.org/").exit_code, 0);
  const std::string events =
      egress_events({"\"reason\":\"no SNI\"", "\"reason\":\"name was not resolved through governed DNS\""});
  EXPECT_NE(events.find("\"reason\":\"no SNI\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"name was not resolved through governed DNS\""), std::string::npos)
      << events;
  EXPECT_EQ(events.find("egress:allow"), std::string::npos) << events;
}

// zerod closes a guest's connection first (a refusal, Connection: close),
// so its host holds that four-tuple in TIME_WAIT; the guest's next
// connection from the same port must still reach the proxy with its first
// SYN (zerod's listener lookup, datapath/listener_lookup.h; the datapath
// test TapDatapathTest.ASynOnAFourTupleTheHostHoldsInTimeWait... has the
// control without it). Before, the SYN met the old connection's ACK and was
// sent again 10 ms to a second later.
TEST_F(ProxyTest, AGuestsNextConnectionFromThePortZerodClosedGoesThroughAtOnce) {
  const std::string port = std::to_string(42000 + (::getpid() % 20000));
  // From PORT: a request, read to the end (zerod answers and closes first);
  // prints the SYN's retransmissions (tcpi_total_retrans) and the answer's status line.
  const std::string once =
      "python3 -c 'import socket,struct,sys\n"
      "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); "
      "s.bind((\"\",int(sys.argv[1])))\n"
      "s.settimeout(8); s.connect((\"198.18.0.11\",80))\n"
      "r=struct.unpack_from(\"I\",s.getsockopt(socket.IPPROTO_TCP,socket.TCP_INFO,104),100)[0]\n"
      "s.sendall(b\"GET / HTTP/1.1\\r\\nHost: 198.18.0.11\\r\\nConnection: close\\r\\n\\r\\n\")\n"
      "a=b\"\"\n"
      "while (c:=s.recv(4096)): a+=c\n"
      "s.close(); print(r, a.split(b\"\\r\\n\")[0].decode())' ";
  const CommandResult first = guest(once + port);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_NE(first.output.find("HTTP/1.1 "), std::string::npos) << first.output;  // zerod answered
  const CommandResult tw = run_in_netns(lab_->host_netns(), "ss -Htan state time-wait");
  ASSERT_NE(tw.output.find(net::to_string(lab_->guests()[0].guest_ip4) + ":" + port), std::string::npos)
      << "no TIME_WAIT to test against:\n"
      << tw.output;
  const CommandResult second = guest(once + port);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(second.output.substr(0, 2), "0 ") << "the SYN was sent again: " << second.output;
}

TEST_F(ProxyTest, NamesResolvingToMetadataOrPrivateAddressesAreRefused) {
  // DNS may be made to answer an internal address; the proxy still refuses it.
  EXPECT_EQ(dig("meta.npmjs.org"), "169.254.169.254\n");
  EXPECT_NE(curl("https://meta.npmjs.org/").exit_code, 0);
  const std::string refused = "\"reason\":\"special-purpose: metadata\"";
  EXPECT_NE(egress_events({refused}).find(refused), std::string::npos);
}

TEST_F(ProxyTest, L4RuleDestinationIsSplicedAndOtherPortsAreNot) {
  ASSERT_EQ(dig("db.internal"), "198.18.0.13\n");
  auto r = guest("echo ping-5432 | nc -w 2 -q 1 198.18.0.13 5432");
  EXPECT_EQ(r.output, "ping-5432\n") << r.output;
  // An echo on 5433 too, which the host side reaches (so the listener is up
  // and routed): only the missing L4 rule stops the guest.
  servers_.push_back(spawn_in_inet({"socat", "TCP-LISTEN:5433,bind=198.18.0.13,reuseaddr,fork", "EXEC:cat"}));
  std::string from_host;
  for (int i = 0; i < 50 && from_host != "x\n"; ++i) {
    from_host = run_in_netns(lab_->host_netns(), "echo x | nc -w 2 -q 1 198.18.0.13 5433").output;
    if (from_host != "x\n") std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(from_host, "x\n") << "the 5433 echo never answered the host side";
  EXPECT_EQ(guest("echo x | nc -w 2 -q 1 198.18.0.13 5433").output, "");  // drop:tcp_port in the datapath
}

TEST_F(ProxyTest, AnIdleRelayedConnectionIsClosed) {
  ASSERT_EQ(dig("db.internal"), "198.18.0.13\n");
  // One line echoed, then silence: zerod (idle timeout 2 s here) closes it.
  auto r = guest(
      "bash -c 's=$(date +%s); nc 198.18.0.13 5432 < <(echo hi; sleep 9); e=$(date +%s); echo $((e - s))'");
  EXPECT_EQ(r.output.substr(0, 3), "hi\n") << r.output;
  const int seconds = std::atoi(r.output.substr(3).c_str());
  EXPECT_GE(seconds, 2) << r.output;
  EXPECT_LE(seconds, 5) << r.output;
  EXPECT_NE(egress_events({"\"end\":\"idle timeout\""}).find("\"end\":\"idle timeout\""), std::string::npos);
  // Relayed by the kernel's sockmap (this fixture turns it on), not the
  // splice(2) fallback: counted when
  // the kernel took the pair, before the echo could come back. (The guest
  // keeps its side open: one that half-closes before the proxy has its
  // upstream cannot be put in a sockhash and is spliced instead.)
  auto m = run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics");
  const std::string line = "zn_proxy_connections_total{result=\"kernel_spliced\"} ";
  const size_t at = m.output.find(line);
  ASSERT_NE(at, std::string::npos) << m.output;
  EXPECT_GE(std::atoi(m.output.c_str() + at + line.size()), 1) << m.output;
}

TEST_F(ProxyTest, ASlowClientIsTimedOut) {
  // Connects to 443 and sends nothing: the proxy gives up after its hello
  // deadline (5 s) and resets; curl would wait 8 s.
  auto r = guest("bash -c 's=$(date +%s); nc 198.18.0.12 443 < <(sleep 9); e=$(date +%s); echo $((e - s))'");
  const int seconds = std::atoi(r.output.c_str());
  EXPECT_GE(seconds, 4) << r.output;  // the connection was accepted and held ...
  EXPECT_LE(seconds, 7) << r.output;  // ... then reset at the hello deadline
}

TEST_F(ProxyTest, AGuestOverItsConnectionCapIsResetUntilItsConnectionsEnd) {
  ASSERT_EQ(dig("registry.npmjs.org"), "198.18.0.12\n");
  // 64 connections (the cap in these tests) held in the hello phase, then
  // one more from the same address: reset at accept. Once they end, the
  // guest is served again. (The cap counts per guest address.)
  auto r = guest(
      "bash -c 'for i in $(seq 64); do sleep 4 | nc 198.18.0.12 443 > /dev/null & done; sleep 2; "
      "curl -4 -s -m 3 --cacert " +
      p("guest-trust.pem") +
      " -o /dev/null https://registry.npmjs.org/; echo rc=$?; wait; "
      "curl -4 -s -m 3 --cacert " +
      p("guest-trust.pem") + " -o /dev/null https://registry.npmjs.org/; echo rc=$?'");
  EXPECT_NE(r.output.find("rc="), std::string::npos) << r.output;
  EXPECT_NE(r.output.substr(0, 5), "rc=0\n") << r.output;
  EXPECT_EQ(r.output.substr(r.output.size() - 5), "rc=0\n") << r.output;
  auto m = run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics");
  const std::string line = "zn_proxy_connections_total{result=\"guest_cap\"} ";
  const size_t at = m.output.find(line);
  ASSERT_NE(at, std::string::npos) << m.output;
  EXPECT_GE(std::atoi(m.output.c_str() + at + line.size()), 1) << m.output;
}

}  // namespace
}  // namespace zn::test
