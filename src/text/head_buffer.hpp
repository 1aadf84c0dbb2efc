#pragma once
// Keeps the first N bytes of a stream and counts all of it, so memory stays bounded however
// much is written (a handler's result: its stdout, an http body, the sql handler's rows).

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace pgjobd {

class HeadBuffer {
 public:
  explicit HeadBuffer(std::size_t capacity) : capacity_(capacity) {}

  void append(std::string_view data) {
    total_ += data.size();
    if (bytes_.size() < capacity_) {
      bytes_.append(data.substr(0, std::min(data.size(), capacity_ - bytes_.size())));
    }
  }

  const std::string& bytes() const { return bytes_; }
  std::string take() { return std::move(bytes_); }
  // Every byte appended, the dropped ones included.
  std::size_t total() const { return total_; }

 private:
  std::size_t capacity_;
  std::string bytes_;
  std::size_t total_ = 0;
};

}  // namespace pgjobd
