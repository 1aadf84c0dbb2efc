#pragma once
// The schema migrations (sql/NNN_name.up.sql) and the functions (sql/functions/*.sql)
// compiled into this binary.

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

// One file of sql/functions/: its name without .sql, and its SQL with @schema@-style
// placeholders (sql/functions/README.md), filled in by the migrator.
struct FunctionFile {
  const char* name;
  const char* sql;
};

// In file-name order, the order they are applied in.
std::span<const FunctionFile> function_files();

// SHA-256 of every function file's name and text: a schema whose recorded digest differs
// has another binary's functions (or none yet).
const char* functions_digest();

}  // namespace pgjobd
