#include "integration/lab_datapath.h"

#include <unistd.h>

#include <cstdio>
#include <random>

#include "broker/session/datapath_entry.h"
#include "zn-lab/governed_lab.h"
#include "common/netns.h"
#include "userspace/datapath/bpffs.h"

namespace zn::test {

std::string unique_lab_prefix(const std::string& head) {
  static std::mt19937 rng{std::random_device{}()};
  char tail[8];
  std::snprintf(tail, sizeof tail, "%04x", static_cast<unsigned>(rng() & 0xffff));
  return head + std::to_string(::getpid()) + tail;
}

LabDatapath::LabDatapath(const std::vector<std::string>& guests, uint32_t first_session_idx)
    : first_session_idx_(first_session_idx) {
  lab_ = std::make_unique<vmm::Lab>(vmm::Lab::up(unique_lab_prefix("zi")));
  for (const auto& name : guests) lab_->add_guest(name);
  pin_root_ = lab::lab_pin_root(lab_->prefix());

  // Everything below lives in the lab's host namespace: sockets and netlink
  // (TC attach) bind to the namespace of the thread that creates them.
  NetnsScope in_host(lab_->host_netns());
  datapath_ = dp::Datapath::load({pin_root_});
  maps_ = std::make_unique<dp::DatapathMaps>(datapath_->map_fds());
  proxy4_ = std::make_unique<TransparentTcpListener>("127.0.0.1", kProxyPort);
  proxy6_ = std::make_unique<TransparentTcpListener>("::1", kProxyPort);
  dns_tcp4_ = std::make_unique<TransparentTcpListener>("127.0.0.1", kDnsPort);
  dns_udp4_ = std::make_unique<TransparentUdpSocket>("127.0.0.1", kDnsPort);
  dns_udp6_ = std::make_unique<TransparentUdpSocket>("::1", kDnsPort);
  dp::Listeners listeners;
  listeners.proxy_port = kProxyPort;
  listeners.dns_port = kDnsPort;
  maps_->set_listeners(listeners);
  attach_listener_lookup();

  for (size_t i = 0; i < lab_->guests().size(); ++i) {
    const vmm::LabGuest& g = lab_->guests()[i];
    dp::SessionEntry s = broker::session_entry_for(g, session_idx(i));
    s.event_rate = 100;
    s.event_burst = 1000;
    maps_->put_session(g.tap_ifindex, s);
    attachments_.push_back(
        dp::TcAttachment::attach(g.tap_ifindex, datapath_->ingress_prog_fd(), datapath_->egress_prog_fd()));
  }
}

void LabDatapath::attach_listener_lookup() {
  NetnsScope in_host(lab_->host_netns());
  listener_lookup_ = std::make_unique<dp::ListenerLookup>(*datapath_);
  listener_lookup_->set(dp::ListenerKind::kProxy, proxy4_->fd());
  listener_lookup_->set(dp::ListenerKind::kProxy, proxy6_->fd());
  listener_lookup_->set(dp::ListenerKind::kDns, dns_tcp4_->fd());
}

void LabDatapath::detach_listener_lookup() { listener_lookup_.reset(); }

LabDatapath::~LabDatapath() {
  listener_lookup_.reset();
  try {
    NetnsScope in_host(lab_->host_netns());
    attachments_.clear();
  } catch (...) {
    // The namespace is gone already; its TAPs and filters with it.
  }
  datapath_.reset();
  try {
    dp::remove_pin_root(pin_root_);
  } catch (...) {
  }
  lab_.reset();  // deletes namespaces, TAPs and pumps
}

}  // namespace zn::test
