#include "userspace/proxy/filters/data_filter.h"

#include <openssl/crypto.h>

namespace zn::proxy::filters {

DataChain::~DataChain() {
  for (std::string& s : between_) OPENSSL_cleanse(s.data(), s.size());
}

std::vector<std::string_view> DataChain::names() const {
  std::vector<std::string_view> out;
  for (const auto& f : filters_) out.push_back(f->name());
  return out;
}

DataResult DataChain::run(std::string_view in, Mark mark, std::string& out) {
  if (filters_.empty()) {
    out.append(in);
    return {};
  }
  std::string_view from = in;
  for (size_t i = 0; i < filters_.size(); ++i) {
    const bool last = i + 1 == filters_.size();
    std::string& to = last ? out : between_[i % 2];
    if (!last) to.clear();
    DataResult r = filters_[i]->on_data(from, mark, to);
    if (r.stopped()) return r;
    from = to;
  }
  return {};
}

void DataChain::close() {
  if (closed_) return;
  closed_ = true;
  for (const auto& f : filters_) f->on_close();
}

}  // namespace zn::proxy::filters
