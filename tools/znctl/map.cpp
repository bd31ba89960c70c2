// znctl map: the maps zerod pinned under the pin root, listed, and dumped
// by decoding the layouts of bpf/include/zn_abi.h.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "command.h"
#include "zn_abi.h"

namespace zn::znctl {

namespace {
namespace map_cli {

std::string ip_text(int family, const void* bytes) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family, bytes, buf, sizeof(buf));
  return buf;
}

// True if fd is a BPF map (not a program or link): the kernel says which in
// the fd's fdinfo ("map_type:" lines only for maps). libbpf 1.1 has no typed
// info call to ask instead.
bool is_map_fd(int fd) {
  std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("map_type:", 0) == 0) return true;
  return false;
}

// Walks the pinned map and decodes each entry by the map's name.
json dump_map(int fd, const std::string& name) {
  json out = json::array();
  std::vector<uint8_t> key(256), next(256), value(4096);
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, next.data()) == 0) {
    key = next;
    prev = key.data();
    if (bpf_map_lookup_elem(fd, key.data(), value.data()) != 0) continue;
    if (name == "zn_sessions") {
      uint32_t ifindex;
      zn_session s;
      std::memcpy(&ifindex, key.data(), sizeof(ifindex));
      std::memcpy(&s, value.data(), sizeof(s));
      json ports = json::array();
      for (uint16_t p : s.steered_ports)
        if (p) ports.push_back(ntohs(p));
      json exposed = json::array();
      for (uint16_t p : s.exposed_ports)
        if (p) exposed.push_back(ntohs(p));
      out.push_back({{"ifindex", ifindex},
                     {"session_idx", s.session_idx},
                     {"guest_ip4", ip_text(AF_INET, &s.guest_ip4)},
                     {"gateway_ip4", ip_text(AF_INET, &s.gateway_ip4)},
                     {"guest_ip6", ip_text(AF_INET6, s.guest_ip6)},
                     {"steered_ports", ports},
                     {"exposed_ports", exposed},
                     {"event_rate", s.event_rate},
                     {"event_burst", s.event_burst}});
    } else if (name == "zn_l4_allow") {
      zn_l4_key k;
      zn_l4_value v;
      std::memcpy(&k, key.data(), sizeof(k));
      std::memcpy(&v, value.data(), sizeof(v));
      // ports: every port allowed there, covering prefixes' folded in;
      // port: this prefix's own rule (0 = any port).
      json ports = json::array();
      for (unsigned i = 0; i < v.nports && i < ZN_L4_MAX_PORTS; ++i) ports.push_back(ntohs(v.ports[i]));
      out.push_back({{"session_idx", k.session_idx},
                     {"prefix", ip_text(k.family == 6 ? AF_INET6 : AF_INET, k.addr) + "/" +
                                    std::to_string(k.prefixlen - ZN_L4_KEY_FIXED_BITS)},
                     {"port", v.own_any || v.own_nports == 0 ? 0 : ntohs(v.ports[0])},
                     {"ports", ports},
                     {"any_port", v.any_port != 0},
                     {"rule", v.rule_id}});
    } else if (name == "zn_listeners") {
      zn_listeners l;
      std::memcpy(&l, value.data(), sizeof(l));
      out.push_back({{"proxy", ip_text(AF_INET, &l.proxy_ip4) + ":" + std::to_string(ntohs(l.proxy_port))},
                     {"proxy6", ip_text(AF_INET6, l.proxy_ip6)},
                     {"dns", ip_text(AF_INET, &l.dns_ip4) + ":" + std::to_string(ntohs(l.dns_port))},
                     {"dns6", ip_text(AF_INET6, l.dns_ip6)}});
    } else if (name == "zn_l4_count") {
      uint32_t idx, count;
      std::memcpy(&idx, key.data(), sizeof(idx));
      std::memcpy(&count, value.data(), sizeof(count));
      if (count) out.push_back({{"session_idx", idx}, {"rules", count}});
    } else {
      throw UsageError(
          "map dump decodes zn_sessions, zn_l4_allow, zn_listeners and zn_l4_count; "
          "counters: znctl stats");
    }
  }
  return out;
}

int list(const Args&) {
  json r = json::array();
  for (const auto& e : std::filesystem::directory_iterator(options.pin_root)) {
    int fd = bpf_obj_get(e.path().c_str());
    if (fd < 0) continue;
    // Programs are pinned beside the maps; the info call would fill a map
    // struct with a program's fields.
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (is_map_fd(fd) && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
      r.push_back({{"id", info.id},
                   {"name", info.name},
                   {"type", info.type},
                   {"key_bytes", info.key_size},
                   {"value_bytes", info.value_size},
                   {"max_entries", info.max_entries},
                   {"pinned", e.path().string()}});
    ::close(fd);
  }
  print(r, [&] {
    for (const auto& m : r)
      std::printf("%u: %-14s key %uB  value %uB  max_entries %u  pinned %s\n", m["id"].get<unsigned>(),
                  m["name"].get<std::string>().c_str(), m["key_bytes"].get<unsigned>(),
                  m["value_bytes"].get<unsigned>(), m["max_entries"].get<unsigned>(),
                  m["pinned"].get<std::string>().c_str());
  });
  return 0;
}

int dump(const Args& a) {
  const std::string name = arg(a, 0, "NAME");
  const std::string path = options.pin_root + "/" + name;
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0) throw std::runtime_error("no pinned map " + path);
  json r = dump_map(fd, name);
  ::close(fd);
  print(r, [&] {
    for (const auto& e : r) std::cout << e.dump() << "\n";
  });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"list", "map list", list},
    {"dump", "map dump zn_sessions|zn_l4_allow|zn_listeners|zn_l4_count", dump},
};

}  // namespace map_cli
}  // namespace

std::span<const Verb> map_verbs() { return map_cli::kVerbs; }

}  // namespace zn::znctl
