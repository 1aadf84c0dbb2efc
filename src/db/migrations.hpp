#pragma once
// The schema migrations compiled into this binary (from sql/NNN_name.up.sql).

#include <span>

namespace pgjobd {

struct Migration {
  int version;
  const char* name;
  const char* up_sql;
};

// In ascending version order, numbered 1, 2, 3, ... without gaps.
std::span<const Migration> migrations();

inline int latest_schema_version() {
  const auto all = migrations();
  return all.empty() ? 0 : all.back().version;
}

}  // namespace pgjobd
