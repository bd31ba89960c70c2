#include "userspace/h2/body_buffer.h"

#include <algorithm>
#include <cstring>

namespace zn::h2 {

void BodyBuffer::append(std::string_view bytes) {
  size_ += bytes.size();
  while (!bytes.empty()) {
    if (chunks_.empty() || chunks_.back().size() == kChunk) chunks_.emplace_back();
    std::string& back = chunks_.back();
    const size_t n = std::min(bytes.size(), kChunk - back.size());
    if (back.capacity() < back.size() + n) {
      // Grown by hand: std::string's own growth doubles, past kChunk too.
      std::string grown;
      grown.reserve(std::min(kChunk, std::max(2 * back.capacity(), back.size() + n)));
      grown.append(back);
      back.swap(grown);
    }
    back.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
}

size_t BodyBuffer::take(uint8_t* out, size_t n) {
  size_t done = 0;
  while (done < n && !chunks_.empty()) {
    const std::string& front = chunks_.front();
    const size_t k = std::min(n - done, front.size() - taken_);
    std::memcpy(out + done, front.data() + taken_, k);
    done += k;
    taken_ += k;
    if (taken_ == front.size()) {
      chunks_.pop_front();
      taken_ = 0;
    }
  }
  size_ -= done;
  return done;
}

}  // namespace zn::h2
