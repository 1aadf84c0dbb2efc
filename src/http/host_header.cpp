// Whether a Host header (or a listen address) names this machine's loopback.
#include "http/host_header.hpp"

#include <algorithm>
#include <cctype>

namespace pgjobd {

bool is_loopback_host_header(std::string_view host) {
  std::string_view name = host;
  if (name.starts_with("[")) {
    const std::size_t end = name.find(']');
    if (end == std::string_view::npos) return false;
    // After "[...]" only ":port" may follow.
    if (end + 1 < name.size() && name[end + 1] != ':') return false;
    name = name.substr(0, end + 1);
  } else {
    name = name.substr(0, name.find(':'));
  }
  const auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  const std::string_view localhost = "localhost";
  if (std::equal(name.begin(), name.end(), localhost.begin(), localhost.end(),
                 [&](char a, char b) { return lower(a) == b; }) ||
      name == "[::1]") {
    return true;
  }
  if (!name.starts_with("127.")) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return c == '.' || std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace pgjobd
