// znctl prog: the TC programs zerod pinned under the pin root.
#include <bpf/bpf.h>
#include <unistd.h>

#include <cstdio>

#include "command.h"

namespace zn::znctl {

namespace {
namespace prog_cli {

int show(const Args&) {
  json r = json::array();
  for (const char* name : {"tap_ingress", "tap_egress"}) {
    const std::string path = options.pin_root + "/" + name;
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0) throw std::runtime_error("no pinned program " + path);
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    bpf_obj_get_info_by_fd(fd, &info, &len);
    ::close(fd);
    r.push_back({{"id", info.id},
                 {"name", info.name},
                 {"pinned", path},
                 {"run_cnt", info.run_cnt},
                 {"xlated_bytes", info.xlated_prog_len},
                 {"jited_bytes", info.jited_prog_len},
                 {"maps", info.nr_map_ids}});
  }
  print(r, [&] {
    for (const auto& p : r)
      std::printf("%u: sched_cls  name %s  pinned %s\n\txlated %uB  jited %uB  maps %u\n",
                  p["id"].get<unsigned>(), p["name"].get<std::string>().c_str(),
                  p["pinned"].get<std::string>().c_str(), p["xlated_bytes"].get<unsigned>(),
                  p["jited_bytes"].get<unsigned>(), p["maps"].get<unsigned>());
  });
  return 0;
}

constexpr Verb kVerbs[] = {{"show", "prog show", show}};

}  // namespace prog_cli
}  // namespace

std::span<const Verb> prog_verbs() { return prog_cli::kVerbs; }

}  // namespace zn::znctl
