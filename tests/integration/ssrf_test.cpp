// Issue 9, class 2: the host's own addresses (and other guests') reached
// through the proxy. An allowed name that resolves to a session's gateway,
// the host's uplink, loopback or another guest must never be connected, on
// any path (passthrough 443, interception 443, plain HTTP 80, L4 rules, an
// IP-literal rule), while the same requests to the stand-in internet go
// through with the connected address in the audit. Listeners on those host
// addresses record every connection they get: none may arrive, and a direct
// connect from the host afterwards proves each one was live and reachable.
//
// Also, root-only: the local table follows address changes in a fresh
// network namespace (LocalAddresses + DestinationGuard).
#include <gtest/gtest.h>

#include "common/netns.h"
#include "integration/proxy_fixture.h"
#include "userspace/proxy/destination_guard.h"
#include "userspace/net/local_addresses.h"

namespace zn::test {
namespace {

// Records "ADDR:PORT" per accepted connection; IP_FREEBIND so the gateway's
// IPv6 address can be bound while still tentative.
constexpr const char* kListener = R"PY(
import selectors, socket, sys
log = sys.argv[1]
sel = selectors.DefaultSelector()
for spec in sys.argv[2:]:
    host, port = spec.rsplit(':', 1)
    host = host.strip('[]')
    s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_IP, 15, 1)
    s.bind((host, int(port)))
    s.listen(64)
    sel.register(s, selectors.EVENT_READ, spec)
open(log + '.ready', 'w').close()
while True:
    for key, _ in sel.select():
        c, peer = key.fileobj.accept()
        with open(log, 'a') as f:
            f.write(key.data + '\n')
        c.close()
)PY";

// label -> where its names point: the host itself, the session's gateway,
// another guest, loopback, and the mapped form of the uplink.
const std::vector<std::pair<std::string, std::string>> kHostile = {
    {"gw4", "198.19.0.1"},   {"gw6", "2001:db8:19::1"},
    {"up4", "198.18.255.1"}, {"up6", "2001:db8:18:ff::1"},
    {"lo4", "127.0.0.1"},    {"lo6", "::1"},
    {"peer", "198.19.1.2"},  {"mapped", "::ffff:198.18.255.1"}};

class SsrfTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    for (const auto& [label, address] : kHostile)
      for (const char* zone : {".npmjs.org", ".intercept.test"})
        config["dns_static"][label + zone] = {address};
    // A name with a hostile and a good answer: only the good one is used.
    config["dns_static"]["mix.npmjs.org"] = {"198.19.0.1", "198.18.0.12"};
    config["dns_static"]["mix.intercept.test"] = {"127.0.0.1", "198.18.0.10"};
    config["dns_static"]["down.intercept.test"] = {"198.18.0.13"};  // nothing listens on :80 there
    config["dns_static"]["up4.l4.test"] = {"198.18.255.1"};
  }

  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    // Another guest (no session): only the proxy's refusal keeps zerod off it.
    lab_->add_guest("g1");
    json r = call("session.update",
                  {{"id", "user-1"}, {"policy", policy(R"({"host":"*.intercept.test","methods":["GET"]},
      {"host":"198.18.255.1"}, {"host":"198.19.1.2"},
      {"host":"198.18.255.1","port":8444,"proto":"tcp"}, {"host":"198.19.1.2","port":8444,"proto":"tcp"},
      {"host":"up4.l4.test","port":8445,"proto":"tcp"}, {"host":"198.18.0.13","port":5433,"proto":"tcp"},)")}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    std::ofstream(dir_ / "listener.py") << kListener;
    listen(
        lab_->host_netns(), "host",
        {"198.19.0.1:443", "198.19.0.1:80", "[2001:db8:19::1]:443", "[2001:db8:19::1]:80", "198.18.255.1:443",
         "198.18.255.1:80", "198.18.255.1:8444", "198.18.255.1:8445", "[2001:db8:18:ff::1]:443",
         "[2001:db8:18:ff::1]:80", "127.0.0.1:443", "127.0.0.1:80", "[::1]:443", "[::1]:80"});
    listen(lab_->guests()[1].netns, "peer", {"198.19.1.2:443", "198.19.1.2:80", "198.19.1.2:8444"});
  }

  void listen(const std::string& ns, const std::string& name, const std::vector<std::string>& specs) {
    const std::string log = (dir_ / (name + ".hits")).string();
    std::vector<std::string> argv = {"python3", (dir_ / "listener.py").string(), log};
    argv.insert(argv.end(), specs.begin(), specs.end());
    pid_t pid = spawn_in(ns, argv);
    servers_.push_back(pid);
    listeners_.push_back({ns, name, specs});
    for (int i = 0; i < 100 && !fs::exists(log + ".ready"); ++i) std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(fs::exists(log + ".ready")) << "listener " << name << " did not start";
  }
  std::string hits(const std::string& name) { return slurp(dir_ / (name + ".hits")); }

  // No listener saw a connection from the proxy; then each is connected
  // from the host side directly, which it must record (it was live and
  // reachable, so only zerod's refusal kept the proxy away).
  void expect_no_hits_then_prove_listeners_live() {
    for (const auto& l : listeners_) EXPECT_EQ(hits(l.name), "") << l.name << " was connected by the proxy";
    for (const auto& l : listeners_) {
      for (const std::string& spec : l.specs) {
        const size_t colon = spec.rfind(':');
        std::string host = spec.substr(0, colon);
        if (host.front() == '[') host = host.substr(1, host.size() - 2);
        run_in_netns(lab_->host_netns(), "nc -z -w 2 " + host + " " + spec.substr(colon + 1));
      }
      // The listener logs after accepting: give it a moment to catch up.
      auto all_seen = [&] {
        const std::string h = hits(l.name);
        return std::all_of(l.specs.begin(), l.specs.end(),
                           [&](const std::string& spec) { return h.find(spec + "\n") != std::string::npos; });
      };
      for (int i = 0; i < 100 && !all_seen(); ++i) std::this_thread::sleep_for(50ms);
      for (const std::string& spec : l.specs)
        EXPECT_NE(hits(l.name).find(spec + "\n"), std::string::npos)
            << spec << " was not reachable from the host";
    }
  }

  // The guest resolves through zerod (so the name is pinned for its
  // session), as the probe suite's guest would.
  void resolve(const std::string& name, const std::string& address) {
    const bool v6 = address.find(':') != std::string::npos;
    auto r = guest("dig @8.8.8.8 " + std::string(v6 ? "AAAA " : "") + name + " +short +tries=1 +time=2");
    EXPECT_EQ(r.output, address + "\n") << name;
  }

  // The audit once `needle` is in it (a connection's event is written as it
  // closes, after the guest saw the end), or as it is after 2 s.
  std::string events_once(const std::string& needle) {
    std::string events;
    for (int i = 0; i < 40; ++i) {
      events = egress_events();
      if (events.find(needle) != std::string::npos) break;
      std::this_thread::sleep_for(50ms);
    }
    return events;
  }

  // egress:allow events for a host.
  static int allows_for(const std::string& events, const std::string& host) {
    int n = 0;
    std::istringstream lines(events);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("egress:allow ", 0) == 0 && line.find("\"host\":\"" + host + "\"") != std::string::npos)
        n++;
    return n;
  }

  struct Listener {
    std::string ns, name;
    std::vector<std::string> specs;
  };
  std::vector<Listener> listeners_;
};

TEST_F(SsrfTest, PassthroughToTheHostsOwnAddressesAndOtherGuestsIsRefused) {
  for (const auto& [label, address] : kHostile) {
    const std::string name = label + ".npmjs.org";
    resolve(name, address);
    // The guest aims at a legitimate upstream; the proxy connects where its
    // own resolution of the SNI points.
    auto r = curl("--resolve " + name + ":443:198.18.0.12 https://" + name + "/");
    EXPECT_NE(r.exit_code, 0) << name << ": " << r.output;
  }
  // An IP-literal rule naming the host's uplink or another guest does not
  // suffice on its own (no SNI: the rule names the destination).
  EXPECT_NE(guest("curl -sk -m 5 https://198.18.255.1/").exit_code, 0);
  EXPECT_NE(guest("curl -sk -m 5 https://198.19.1.2/").exit_code, 0);

  // Positive controls: the same path to the stand-in internet, and a name
  // with a hostile answer next to a good one (only the good one is used).
  ASSERT_EQ(dig("registry.npmjs.org"), "198.18.0.12\n");
  auto ok = curl("https://registry.npmjs.org/");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("<HTML>"), std::string::npos);
  guest("dig @8.8.8.8 mix.npmjs.org +short +tries=1 +time=2");
  // -k: the server there shows registry.npmjs.org's certificate.
  auto mix = guest("curl -sk -m 5 --resolve mix.npmjs.org:443:198.18.0.12 https://mix.npmjs.org/");
  EXPECT_EQ(mix.exit_code, 0) << mix.output;
  EXPECT_NE(mix.output.find("<HTML>"), std::string::npos);

  expect_no_hits_then_prove_listeners_live();
  const std::string events = events_once("\"upstream\":\"198.18.0.12:443\"");
  EXPECT_NE(events.find("\"reason\":\"local address\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"guest pool\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"upstream\":\"198.18.0.12:443\""), std::string::npos) << events;
  for (const auto& [label, address] : kHostile)
    EXPECT_EQ(allows_for(events, label + ".npmjs.org"), 0) << label << ": " << events;
  EXPECT_EQ(allows_for(events, "mix.npmjs.org"), 1) << events;
  EXPECT_NE(
      events.find("\"host\":\"mix.npmjs.org\",\"mode\":\"passthrough\",\"upstream\":\"198.18.0.12:443\""),
      std::string::npos)
      << events;
}

TEST_F(SsrfTest, InterceptedHttpsAndPlainHttpToTheHostsOwnAddressesAre403) {
  for (const auto& [label, address] : kHostile) {
    const std::string name = label + ".intercept.test";
    resolve(name, address);
    auto tls = curl("--resolve " + name + ":443:198.18.0.10 https://" + name + "/x");
    EXPECT_NE(tls.output.find("zeroness: blocked by policy ("), std::string::npos)
        << name << ": " << tls.output;
    auto plain = guest("curl -s -m 5 --resolve " + name + ":80:198.18.0.10 http://" + name + "/x");
    EXPECT_NE(plain.output.find("zeroness: blocked by policy ("), std::string::npos)
        << name << ": " << plain.output;
  }
  auto gw = curl("--resolve gw4.intercept.test:443:198.18.0.10 https://gw4.intercept.test/x");
  EXPECT_NE(gw.output.find("(local address)"), std::string::npos) << gw.output;
  auto peer = guest("curl -s -m 5 --resolve peer.intercept.test:80:198.18.0.10 http://peer.intercept.test/x");
  EXPECT_NE(peer.output.find("(guest pool)"), std::string::npos) << peer.output;

  // Positive controls: TLS and plain HTTP to the stand-in internet, and the
  // name with a loopback answer next to a good one.
  ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");
  auto ok = curl("https://api.github.com/repos/x");
  EXPECT_NE(ok.output.find("\"method\""), std::string::npos) << ok.output;
  auto ok80 = guest("curl -s -m 5 http://api.github.com/repos/x");
  EXPECT_NE(ok80.output.find("\"method\""), std::string::npos) << ok80.output;
  guest("dig @8.8.8.8 mix.intercept.test +short +tries=1 +time=2");
  auto mix = guest("curl -s -m 5 --resolve mix.intercept.test:80:198.18.0.10 http://mix.intercept.test/x");
  EXPECT_NE(mix.output.find("\"method\""), std::string::npos) << mix.output;

  expect_no_hits_then_prove_listeners_live();
  const std::string events = events_once("\"upstream\":\"198.18.0.10:80\"");
  EXPECT_NE(events.find("\"upstream\":\"198.18.0.10:443\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"upstream\":\"198.18.0.10:80\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"local address\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"guest pool\""), std::string::npos) << events;
}

TEST_F(SsrfTest, L4RulesToTheHostsOwnAddressesAndOtherGuestsAreRefused) {
  // Literal rules: the datapath steers them to the proxy, which refuses.
  EXPECT_EQ(guest("echo x | nc -w 2 -q 1 198.18.255.1 8444").output, "");
  EXPECT_EQ(guest("echo x | nc -w 2 -q 1 198.19.1.2 8444").output, "");
  // A named rule resolving to the host never enters the datapath.
  EXPECT_EQ(guest("echo x | nc -w 2 -q 1 198.18.255.1 8445").output, "");
  // Positive control: the L4 rule to the stand-in internet.
  ASSERT_EQ(dig("db.internal"), "198.18.0.13\n");
  EXPECT_EQ(guest("echo ping-5432 | nc -w 2 -q 1 198.18.0.13 5432").output, "ping-5432\n");

  expect_no_hits_then_prove_listeners_live();
  const std::string events = events_once("\"upstream\":\"198.18.0.13:5432\"");
  EXPECT_NE(events.find("\"upstream\":\"198.18.0.13:5432\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"local address\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"guest pool\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"stage\":\"l4 rule\""), std::string::npos) << events;
}

TEST_F(SsrfTest, AFailedUpstreamConnectIsAnErrorNotAnAllow) {
  // Plain HTTP to an address where nothing listens on 80, and an L4 rule to
  // a closed port: egress:error with the reason, and no egress:allow.
  resolve("down.intercept.test", "198.18.0.13");
  auto r = guest("curl -s -m 5 --resolve down.intercept.test:80:198.18.0.10 http://down.intercept.test/x");
  EXPECT_NE(r.output.find("zeroness: upstream failed"), std::string::npos) << r.output;
  EXPECT_EQ(guest("echo x | nc -w 2 -q 1 198.18.0.13 5433").output, "");
  const std::string events = events_once("\"mode\":\"passthrough\",\"reason\":\"upstream unreachable\"");
  EXPECT_NE(events.find("\"host\":\"down.intercept.test\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"mode\":\"passthrough\",\"reason\":\"upstream unreachable\""), std::string::npos)
      << events;
  EXPECT_EQ(events.find("egress:allow"), std::string::npos) << events;
  // Positive control: a reachable upstream on the same paths is an allow.
  ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");
  auto ok80 = guest("curl -s -m 5 http://api.github.com/repos/x");
  EXPECT_NE(ok80.output.find("\"method\""), std::string::npos) << ok80.output;
  EXPECT_NE(events_once("egress:allow").find("\"upstream\":\"198.18.0.10:80\""), std::string::npos);
}

// Root-only: LocalAddresses in a fresh namespace follows address changes.
class SsrfLocalTable : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = "znssrf" + std::to_string(::getpid());
    ASSERT_EQ(std::system(("ip netns add " + ns_).c_str()), 0);
    ASSERT_EQ(std::system(("ip -n " + ns_ + " link add va type veth peer name vb && ip -n " + ns_ +
                           " link set va up && ip -n " + ns_ + " link set vb up && ip -n " + ns_ +
                           " link set lo up")
                              .c_str()),
              0);
  }
  void TearDown() override { std::system(("ip netns del " + ns_ + " 2>/dev/null").c_str()); }
  void ip(const std::string& args) {
    ASSERT_EQ(std::system(("ip -n " + ns_ + " " + args).c_str()), 0) << args;
  }

  std::string ns_;
};

TEST_F(SsrfLocalTable, AnAddressAddedIsRefusedWithinAMomentAndAllowedAgainOnceRemoved) {
  std::shared_ptr<zn::net::LocalAddresses> local;
  {
    NetnsScope in(ns_);  // its sockets live in the namespace for good
    local = std::make_shared<zn::net::LocalAddresses>();
  }
  proxy::GuardConfig c;
  c.allow = {*zn::net::AddressPrefix::parse("203.0.113.0/24"),
             *zn::net::AddressPrefix::parse("2001:db8:77::/48")};
  proxy::DestinationGuard guard(c, local);
  const auto v4 = *zn::net::IpAddress::parse("203.0.113.77"),
             v6 = *zn::net::IpAddress::parse("2001:db8:77::7"),
             other = *zn::net::IpAddress::parse("203.0.113.78");
  auto refusal = [&](const zn::net::IpAddress& a) { return guard.refusal(a).value_or("allowed"); };
  auto wait_for = [&](const zn::net::IpAddress& a, const std::string& want) {
    for (int i = 0; i < 200 && refusal(a) != want; ++i) std::this_thread::sleep_for(10ms);
    return refusal(a);
  };
  // Positive controls first: allowed by the allowance, not local yet.
  EXPECT_EQ(refusal(v4), "allowed");
  EXPECT_EQ(refusal(v6), "allowed");
  EXPECT_EQ(refusal(*zn::net::IpAddress::parse("127.0.0.1")), "local address");  // lo is up in the namespace

  ip("addr add 203.0.113.77/24 dev va");
  ip("addr add 2001:db8:77::7/64 dev va nodad");
  EXPECT_EQ(wait_for(v4, "local address"), "local address");
  EXPECT_EQ(wait_for(v6, "local address"), "local address");
  EXPECT_EQ(refusal(*zn::net::IpAddress::parse("::ffff:203.0.113.77")), "local address");
  EXPECT_EQ(refusal(*zn::net::IpAddress::parse("203.0.113.255")), "local address");  // the subnet's broadcast
  EXPECT_EQ(refusal(other), "allowed");  // a neighbour on the subnet is not the host

  ip("addr del 203.0.113.77/24 dev va");
  ip("addr del 2001:db8:77::7/64 dev va");
  EXPECT_EQ(wait_for(v4, "allowed"), "allowed");
  EXPECT_EQ(wait_for(v6, "allowed"), "allowed");
  // And again: the watcher keeps following.
  ip("addr add 203.0.113.78/32 dev vb");
  EXPECT_EQ(wait_for(other, "local address"), "local address");

  // An allowance lying inside the local prefix opens it; a covering one does not.
  proxy::GuardConfig exact = c;
  exact.allow.push_back(*zn::net::AddressPrefix::parse("203.0.113.78/32"));
  EXPECT_FALSE(proxy::DestinationGuard(exact, local).refusal(other));
}

}  // namespace
}  // namespace zn::test
