// Origin, Referer and Host checks for the dashboard.
#include "ui/csrf.hpp"

#include <string>

#include "text/ascii.hpp"

namespace pgjobd::ui {

bool same_origin(std::string_view url, std::string_view host) {
  if (host.empty()) return false;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else {
    return false;
  }
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  // "user@host" in a Referer would let a crafted URL smuggle a matching host after the @.
  if (authority.find('@') != std::string_view::npos) return false;
  return equals_ignoring_case(authority, host);
}

bool request_from_own_origin(const char* origin, const char* referer, std::string_view host) {
  if (origin != nullptr && std::string_view(origin) != "null" && *origin != '\0') {
    return same_origin(origin, host);
  }
  if (referer != nullptr && *referer != '\0') return same_origin(referer, host);
  return false;
}

}  // namespace pgjobd::ui
