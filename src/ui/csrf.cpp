// Origin, Referer and Host checks for the dashboard.
#include "ui/csrf.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace pgjobd::ui {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

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
  return iequals(authority, host);
}

bool request_from_own_origin(const char* origin, const char* referer, std::string_view host) {
  if (origin != nullptr && std::string_view(origin) != "null" && *origin != '\0') {
    return same_origin(origin, host);
  }
  if (referer != nullptr && *referer != '\0') return same_origin(referer, host);
  return false;
}

}  // namespace pgjobd::ui
