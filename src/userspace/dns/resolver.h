// Where allowed names are resolved: an upstream resolver (AresResolver) or
// static overrides from the config (StaticResolver, the lab's).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "userspace/net/address.h"

namespace zn::dns {

enum class QType : uint16_t { A = 1, AAAA = 28 };

// DNS response codes the resolvers report.
enum class Rcode : uint8_t { NoError = 0, FormErr = 1, ServFail = 2, NxDomain = 3, NotImp = 4, Refused = 5 };

struct ResolveResult {
  Rcode rcode = Rcode::ServFail;          // NoError with no addresses is NODATA
  std::vector<net::IpAddress> addresses;  // only of the asked family
  uint32_t ttl = 0;                       // seconds, uncapped
};

class Resolver {
 public:
  using Callback = std::function<void(ResolveResult)>;
  virtual ~Resolver() = default;
  // Executor: any thread (the DNS loop, the proxy's worker pool through the
  // broker's ConfiguredResolver); never blocks.
  // name: lowercase, no trailing dot. The callback is called exactly once,
  // possibly synchronously inside resolve() or on another thread; it must not
  // block. Failures (timeouts, unreachable upstream) are Rcode::ServFail.
  virtual void resolve(const std::string& name, QType qtype, Callback callback) = 0;
};

}  // namespace zn::dns
