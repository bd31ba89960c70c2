#include "userspace/datapath/tc_attachment.h"

#include <atomic>
#include <utility>

#include "userspace/datapath/clsact_filters.h"
#include "userspace/datapath/tcx_hooks.h"

namespace zn::dp {
namespace {

std::atomic<TcBackend> chosen{TcBackend::kClsact};

}  // namespace

TcBackend TcAttachment::backend() { return chosen.load(); }

void TcAttachment::use_backend(TcBackend backend) { chosen.store(backend); }

bool TcAttachment::tcx_supported() { return tcx::supported(); }

TcAttachment TcAttachment::attach(int ifindex, int ingress_prog_fd, int egress_prog_fd) {
  const TcBackend b = backend();
  if (b == TcBackend::kTcx) {
    // Egress first: by the time ingress steers anything, replies can flow.
    tcx::attach(ifindex, false, egress_prog_fd);
    tcx::attach(ifindex, true, ingress_prog_fd);
    return TcAttachment(ifindex, b, false);
  }
  TcAttachment attachment(ifindex, b, clsact::create_qdisc(ifindex));
  clsact::attach(ifindex, false, egress_prog_fd);
  clsact::attach(ifindex, true, ingress_prog_fd);
  return attachment;
}

TcAttachment::TcAttachment(TcAttachment&& other) noexcept
    : ifindex_(other.ifindex_),
      backend_(other.backend_),
      created_qdisc_(other.created_qdisc_),
      attached_(std::exchange(other.attached_, false)) {}

TcAttachment& TcAttachment::operator=(TcAttachment&& other) noexcept {
  if (this != &other) {
    detach();
    ifindex_ = other.ifindex_;
    backend_ = other.backend_;
    created_qdisc_ = other.created_qdisc_;
    attached_ = std::exchange(other.attached_, false);
  }
  return *this;
}

TcAttachment::~TcAttachment() { detach(); }

void TcAttachment::detach() {
  if (!attached_) return;
  attached_ = false;
  if (backend_ == TcBackend::kTcx) {
    tcx::detach(ifindex_, true);
    tcx::detach(ifindex_, false);
    return;
  }
  clsact::detach(ifindex_, true);
  clsact::detach(ifindex_, false);
  if (created_qdisc_) clsact::destroy_qdisc(ifindex_);
}

bool TcAttachment::is_attached(int ifindex) {
  if (tcx::supported() && tcx::has_ours(ifindex, true)) return true;
  return clsact::has_ours(ifindex, true);
}

bool TcAttachment::remove_other_backend(int ifindex) {
  const bool tcx_is_other = backend() == TcBackend::kClsact;
  if (tcx_is_other && !tcx::supported()) return false;
  bool found = false;
  for (const bool ingress : {true, false}) {
    if (!(tcx_is_other ? tcx::has_ours(ifindex, ingress) : clsact::has_ours(ifindex, ingress))) continue;
    found = true;
    if (tcx_is_other)
      tcx::detach(ifindex, ingress);
    else
      clsact::detach(ifindex, ingress);
  }
  return found;
}

}  // namespace zn::dp
