#pragma once
// ASCII case-insensitive comparison: HTTP header names and tokens, URL schemes and hosts.

#include <algorithm>
#include <cctype>
#include <string_view>

namespace pgjobd {

inline bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace pgjobd
