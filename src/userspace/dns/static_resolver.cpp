#include "userspace/dns/static_resolver.h"

#include <algorithm>
#include <cctype>

namespace zn::dns {
namespace {

std::string normalize(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  while (!name.empty() && name.back() == '.') name.pop_back();
  return name;
}

}  // namespace

StaticResolver::StaticResolver(const Table& table, uint32_t ttl) : ttl_(ttl) {
  for (const auto& [name, addrs] : table) {
    auto& slot = table_[normalize(name)];
    slot.insert(slot.end(), addrs.begin(), addrs.end());
  }
}

void StaticResolver::resolve(const std::string& name, QType qtype, Callback callback) {
  ++calls_;
  ResolveResult result;
  auto it = table_.find(normalize(name));
  if (it == table_.end()) {
    result.rcode = Rcode::NxDomain;
  } else {
    result.rcode = Rcode::NoError;
    result.ttl = ttl_;
    const int family = qtype == QType::A ? AF_INET : AF_INET6;
    for (const auto& a : it->second)
      if (a.family == family) result.addresses.push_back(a);
  }
  callback(std::move(result));
}

}  // namespace zn::dns
