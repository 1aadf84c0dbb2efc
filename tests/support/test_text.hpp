#pragma once
// Small text helpers the tests share: substring checks, SQL literals for test-made rows,
// elapsed seconds.

#include <chrono>
#include <string>

namespace pgjobd::testing {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// 'text' with quotes doubled (standard_conforming_strings), for SQL a test writes itself
// (never for product code, which sends values as $n parameters).
inline std::string sql_literal(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace pgjobd::testing
