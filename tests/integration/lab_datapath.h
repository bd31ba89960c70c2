// A lab with the datapath attached to every guest TAP and stand-in host
// sockets (transparent proxy listener, DNS UDP/TCP) in its host namespace:
// the fixture of the namespace integration tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/host_sockets.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/listener_lookup.h"
#include "userspace/datapath/maps.h"
#include "userspace/datapath/tc_attachment.h"
#include "vmm/lab/lab.h"

namespace zn::test {

class LabDatapath {
 public:
  static constexpr uint16_t kProxyPort = 15001;
  static constexpr uint16_t kDnsPort = 15053;

  // guests: lab guest names; guest i gets session index first_session_idx + i.
  LabDatapath(const std::vector<std::string>& guests, uint32_t first_session_idx);
  ~LabDatapath();

  vmm::Lab& lab() { return *lab_; }
  const vmm::LabGuest& guest(size_t i) const { return lab_->guests().at(i); }
  uint32_t session_idx(size_t i) const { return first_session_idx_ + static_cast<uint32_t>(i); }
  dp::Datapath& datapath() { return *datapath_; }
  dp::DatapathMaps& maps() { return *maps_; }
  const std::string& pin_root() const { return pin_root_; }

  TransparentTcpListener& proxy4() { return *proxy4_; }
  TransparentTcpListener& proxy6() { return *proxy6_; }
  TransparentUdpSocket& dns_udp4() { return *dns_udp4_; }
  TransparentUdpSocket& dns_udp6() { return *dns_udp6_; }
  TransparentTcpListener& dns_tcp4() { return *dns_tcp4_; }
  // The namespace's listener lookup over the listeners above (as zerod
  // runs it): attached from the start; detached for a control.
  void attach_listener_lookup();
  void detach_listener_lookup();

 private:
  std::unique_ptr<vmm::Lab> lab_;
  uint32_t first_session_idx_;
  std::string pin_root_;
  std::unique_ptr<dp::Datapath> datapath_;
  std::unique_ptr<dp::DatapathMaps> maps_;
  std::vector<dp::TcAttachment> attachments_;
  std::unique_ptr<dp::ListenerLookup> listener_lookup_;
  std::unique_ptr<TransparentTcpListener> proxy4_, proxy6_, dns_tcp4_;
  std::unique_ptr<TransparentUdpSocket> dns_udp4_, dns_udp6_;
};

// "zi<pid><4 hex>": unique per run, short enough for namespace names.
std::string unique_lab_prefix(const std::string& head);

}  // namespace zn::test
