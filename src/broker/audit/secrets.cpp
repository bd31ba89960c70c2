#include "broker/audit/secrets.h"

namespace zn::broker {

AuditSecrets::AuditSecrets() : all_(std::make_shared<const AuditRedactor>()) {}

bool AuditSecrets::add(std::string value) {
  std::lock_guard lk(mu_);
  const size_t before = global_.size();
  if (!global_.add(value)) return false;
  if (global_.size() == before) return true;  // held already
  ++held_;
  // Every session's redactor carries the daemon-wide values too (one scan
  // per record, and overlapping secrets of both collapse into one marker).
  for (auto& [sid, s] : sessions_) {
    auto next = std::make_shared<AuditRedactor>(*s.redactor);
    next->add(value);
    s.redactor = std::move(next);
  }
  invalidate_all();
  return true;
}

size_t AuditSecrets::set_session(const std::string& sid, const std::vector<std::string>& values) {
  AuditRedactor own;
  size_t accepted = 0;
  for (const std::string& v : values) accepted += own.add(v) ? 1 : 0;
  std::lock_guard lk(mu_);
  auto next = std::make_shared<const AuditRedactor>(AuditRedactor::merged({&global_, &own}));
  auto [it, fresh] = sessions_.try_emplace(sid);
  if (!fresh) held_ -= it->second.own;
  it->second = Session{std::move(next), own.size()};
  held_ += own.size();
  invalidate_all();
  return accepted;
}

void AuditSecrets::forget_session(const std::string& sid) {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  held_ -= it->second.own;
  sessions_.erase(it);
  invalidate_all();
}

std::shared_ptr<const AuditRedactor> AuditSecrets::for_record(const std::string& sid) const {
  std::vector<std::shared_ptr<const AuditRedactor>> parts;
  uint64_t generation = 0;
  {
    std::lock_guard lk(mu_);
    if (!sid.empty())
      if (auto it = sessions_.find(sid); it != sessions_.end()) return it->second.redactor;
    if (all_) return all_;
    // Every value, merged outside the lock (the data path's posts take it).
    parts.reserve(sessions_.size() + 1);
    parts.push_back(std::make_shared<const AuditRedactor>(global_));
    for (const auto& [id, s] : sessions_) parts.push_back(s.redactor);
    generation = generation_;
  }
  std::vector<const AuditRedactor*> views;
  views.reserve(parts.size());
  for (const auto& p : parts) views.push_back(p.get());
  auto all = std::make_shared<const AuditRedactor>(AuditRedactor::merged(views));
  std::lock_guard lk(mu_);
  if (generation == generation_) all_ = all;  // nothing changed meanwhile: kept for the next one
  return all;
}

void AuditSecrets::invalidate_all() {
  all_.reset();
  ++generation_;
}

size_t AuditSecrets::count() const {
  std::lock_guard lk(mu_);
  return held_;
}

}  // namespace zn::broker
