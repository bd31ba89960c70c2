#include "userspace/dns/ares_resolver.h"

#include <ares.h>
#include "common/thread_name.h"
#include "userspace/dns/ldns.h"
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <deque>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace zn::dns {
namespace {

std::once_flag ares_library_once;

struct Request {
  std::string name;
  QType qtype;
  Resolver::Callback callback;
};

Rcode rcode_of(uint8_t r) {
  switch (r) {
    case LDNS_RCODE_NOERROR:
      return Rcode::NoError;
    case LDNS_RCODE_NXDOMAIN:
      return Rcode::NxDomain;
    case LDNS_RCODE_REFUSED:
      return Rcode::Refused;
    default:
      return Rcode::ServFail;
  }
}

}  // namespace

ResolveResult parse_upstream_reply(const unsigned char* wire, size_t size, QType qtype) {
  ResolveResult result;
  ldns_pkt* raw = nullptr;
  if (!wire || ldns_wire2pkt(&raw, wire, size) != LDNS_STATUS_OK || !raw) {
    if (raw) ldns_pkt_free(raw);
    return result;  // ServFail
  }
  std::unique_ptr<ldns_pkt, decltype(&ldns_pkt_free)> pkt(raw, &ldns_pkt_free);
  result.rcode = rcode_of(ldns_pkt_get_rcode(pkt.get()));
  if (result.rcode != Rcode::NoError) return result;
  const ldns_rr_type want = qtype == QType::A ? LDNS_RR_TYPE_A : LDNS_RR_TYPE_AAAA;
  const size_t want_size = qtype == QType::A ? 4 : 16;
  uint32_t ttl = std::numeric_limits<uint32_t>::max();
  const ldns_rr_list* answers = ldns_pkt_answer(pkt.get());
  for (size_t i = 0; answers && i < ldns_rr_list_rr_count(answers); ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(answers, i);
    const ldns_rr_type t = ldns_rr_get_type(rr);
    if (t != want && t != LDNS_RR_TYPE_CNAME) continue;
    ttl = std::min(ttl, ldns_rr_ttl(rr));
    if (t != want || ldns_rr_rd_count(rr) != 1) continue;
    const ldns_rdf* rdf = ldns_rr_rdf(rr, 0);
    if (!rdf || ldns_rdf_size(rdf) != want_size) continue;
    net::IpAddress a;
    a.family = qtype == QType::A ? AF_INET : AF_INET6;
    std::copy_n(ldns_rdf_data(rdf), want_size, a.bytes.begin());
    result.addresses.push_back(a);
  }
  result.ttl = result.addresses.empty() ? 0 : ttl;
  return result;
}

struct AresResolver::Impl {
  AresConfig config;
  ares_channel channel = nullptr;
  int wake_fd = -1;
  std::mutex mutex;
  std::deque<Request> queue;  // guarded by mutex
  bool stopping = false;      // guarded by mutex
  std::atomic<size_t> in_flight{0};
  std::thread thread;

  struct Query {
    Impl* impl;
    QType qtype;
    Resolver::Callback callback;
  };

  static void on_reply(void* arg, int status, int /*timeouts*/, unsigned char* abuf, int alen) {
    std::unique_ptr<Query> q(static_cast<Query*>(arg));
    ResolveResult result;  // ServFail
    // NXDOMAIN / NODATA replies still carry the upstream's packet.
    if (abuf && alen > 0 && (status == ARES_SUCCESS || status == ARES_ENOTFOUND || status == ARES_ENODATA))
      result = parse_upstream_reply(abuf, static_cast<size_t>(alen), q->qtype);
    --q->impl->in_flight;
    q->callback(std::move(result));
  }

  void start_queued() {
    std::deque<Request> batch;
    {
      std::lock_guard lock(mutex);
      batch.swap(queue);
    }
    for (auto& r : batch) {
      auto* q = new Query{this, r.qtype, std::move(r.callback)};
      ares_query(channel, r.name.c_str(), LDNS_RR_CLASS_IN,
                 r.qtype == QType::A ? LDNS_RR_TYPE_A : LDNS_RR_TYPE_AAAA, &Impl::on_reply, q);
    }
  }

  void run() {
    for (;;) {
      {
        std::lock_guard lock(mutex);
        if (stopping) break;
      }
      ares_socket_t socks[ARES_GETSOCK_MAXNUM];
      const int bits = ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM);
      std::vector<pollfd> fds{{wake_fd, POLLIN, 0}};
      for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
        short events = 0;
        if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
        if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
        if (events) fds.push_back({socks[i], events, 0});
      }
      timeval max{1, 0}, tv{};
      timeval* t = ares_timeout(channel, &max, &tv);
      const int timeout_ms = static_cast<int>(t->tv_sec * 1000 + (t->tv_usec + 999) / 1000);
      int rc = ::poll(fds.data(), fds.size(), timeout_ms);
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) {
        uint64_t v;
        (void)::read(wake_fd, &v, sizeof(v));
      }
      bool any = false;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        any = true;
        const bool r = fds[i].revents & (POLLIN | POLLERR | POLLHUP);
        const bool w = fds[i].revents & (POLLOUT | POLLERR | POLLHUP);
        ares_process_fd(channel, r ? fds[i].fd : ARES_SOCKET_BAD, w ? fds[i].fd : ARES_SOCKET_BAD);
      }
      if (!any) ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
      start_queued();
    }
    // Anything still queued or in flight is answered ServFail.
    ares_cancel(channel);
    std::deque<Request> left;
    {
      std::lock_guard lock(mutex);
      left.swap(queue);
    }
    for (auto& r : left) {
      --in_flight;
      r.callback(ResolveResult{});
    }
  }

  void wake() {
    uint64_t one = 1;
    (void)::write(wake_fd, &one, sizeof(one));
  }
};

AresResolver::AresResolver(AresConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  if (impl_->config.servers.empty()) throw std::runtime_error("AresResolver: no upstream servers");
  std::call_once(ares_library_once, [] { ares_library_init(ARES_LIB_INIT_ALL); });

  ares_options opts{};
  opts.timeout = static_cast<int>(impl_->config.timeout.count());
  opts.tries = std::max(1, impl_->config.tries);
  opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
  char lookups[] = "b";
  opts.lookups = lookups;
  const int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS | ARES_OPT_LOOKUPS;
  int rc = ares_init_options(&impl_->channel, &opts, mask);
  if (rc != ARES_SUCCESS) throw std::runtime_error(std::string("ares_init_options: ") + ares_strerror(rc));

  std::string csv;
  for (const auto& s : impl_->config.servers) csv += (csv.empty() ? "" : ",") + s;
  rc = ares_set_servers_ports_csv(impl_->channel, csv.c_str());
  if (rc != ARES_SUCCESS) {
    ares_destroy(impl_->channel);
    throw std::runtime_error("AresResolver: bad servers '" + csv + "': " + ares_strerror(rc));
  }
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->wake_fd < 0) {
    ares_destroy(impl_->channel);
    throw std::runtime_error("AresResolver: eventfd failed");
  }
  impl_->thread = std::thread([impl = impl_.get()] {
    set_thread_name("zn-resolve");
    impl->run();
  });
}

AresResolver::~AresResolver() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake();
  impl_->thread.join();
  ares_destroy(impl_->channel);  // no queries left: ares_cancel ran on the thread
  ::close(impl_->wake_fd);
}

void AresResolver::resolve(const std::string& name, QType qtype, Callback callback) {
  if (impl_->in_flight.fetch_add(1) >= impl_->config.max_pending) {
    --impl_->in_flight;
    callback(ResolveResult{});  // overloaded: ServFail
    return;
  }
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->stopping) {
      impl_->queue.push_back(Request{name, qtype, std::move(callback)});
      callback = nullptr;
    }
  }
  if (callback) {  // shutting down
    --impl_->in_flight;
    callback(ResolveResult{});
    return;
  }
  impl_->wake();
}

}  // namespace zn::dns
