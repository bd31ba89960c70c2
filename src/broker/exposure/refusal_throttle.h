// How many refusals a client of the declared ports gets looked at and
// audited one by one (issue 30). Made-up tickets were refused at thousands
// a second from one client, each a ticket lookup and an audit record. Each
// client (an IPv4 address; an IPv6 /64, one host's share of addresses) has
// a token bucket of refusals: a refusal takes one. Once it is empty the
// client's requests are refused at once (429), their tickets never looked
// at, and without a record each: counted, and summarised in one record per
// (session, port, client) each time take_summaries() is called (once a
// second, like packet:deny). A throttled client is told when its next
// refusal is due (Retry-After). The tables are bounded: past max_clients
// the client refused longest ago is forgotten (an eviction, counted; found
// in constant time, so a stream of new addresses costs no scan of the
// table); past it in the summaries, the rest are counted under "*".
// Thread-safe (the ingress loop and the periodic thread), short locks only.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace zn::broker {

class RefusalThrottle {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  struct Limits {
    double burst = 20;      // refusals a client may have in a row
    double per_second = 1;  // then this many a second
    size_t max_clients = 4096;
  };
  RefusalThrottle();
  RefusalThrottle(Limits limits, Clock clock);

  // Whether `client` (a key: client_key()) has used up its refusals: if so
  // how long until it has one again (at least 1 s), and the attempt is
  // counted for the summary of (session, port); nullopt if it has not.
  std::optional<std::chrono::seconds> throttled(const std::string& session, uint16_t port,
                                                const std::string& client);
  // A refusal of `client`'s request: one token.
  void charge(const std::string& client);

  struct Summary {
    std::string session;
    uint16_t port = 0;
    std::string client;
    uint64_t count = 0;
  };
  // What was counted since the last call.
  std::vector<Summary> take_summaries();
  uint64_t evictions() const;
  size_t clients() const;

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;  // when `tokens` was right
    std::list<std::string>::iterator order;    // its place in by_refusal_
  };
  double refill(Bucket& b, std::chrono::steady_clock::time_point now) const;

  Limits limits_;
  Clock clock_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
  std::list<std::string> by_refusal_;  // clients, refused most recently first
  std::map<std::tuple<std::string, uint16_t, std::string>, uint64_t> counted_;
  uint64_t evictions_ = 0;
};

// The key a client is throttled under: its IPv4 address (an IPv4-mapped
// IPv6 one too), or its IPv6 address's /64 ("2001:db8:1:2::/64").
std::string client_key(const sockaddr_storage& address);

}  // namespace zn::broker
