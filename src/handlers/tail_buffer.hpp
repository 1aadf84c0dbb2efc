#pragma once
// Keeps the last N bytes of a stream, so memory stays bounded however much is written.

#include <cstddef>
#include <string>
#include <string_view>

namespace pgjobd {

class TailBuffer {
 public:
  explicit TailBuffer(std::size_t capacity) : capacity_(capacity) { bytes_.reserve(capacity); }

  void append(std::string_view data) {
    if (data.size() >= capacity_) {
      truncated_ = truncated_ || data.size() > capacity_ || !bytes_.empty();
      bytes_.assign(data.substr(data.size() - capacity_));
      return;
    }
    const std::size_t total = bytes_.size() + data.size();
    if (total > capacity_) {
      // Erasing ≤ capacity bytes per append is cheap next to the read that produced `data`.
      bytes_.erase(0, total - capacity_);
      truncated_ = true;
    }
    bytes_.append(data);
  }

  const std::string& bytes() const { return bytes_; }
  // True when earlier bytes were dropped.
  bool truncated() const { return truncated_; }

 private:
  std::size_t capacity_;
  std::string bytes_;
  bool truncated_ = false;
};

}  // namespace pgjobd
