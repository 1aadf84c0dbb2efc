#pragma once
// The text of an errno value. strerror is not thread-safe (its buffer is shared); the
// error_code's message is.

#include <string>
#include <system_error>

namespace pgjobd {

inline std::string errno_text(int error_number) {
  return std::error_code(error_number, std::generic_category()).message();
}

}  // namespace pgjobd
