// Prepared or unnamed statements of one store (see the header).
#include "db/statement_set.hpp"

#include <algorithm>
#include <stdexcept>
#include <string_view>

namespace pgjobd {

void StatementSet::prepare(pqxx::connection_base& conn) const {
  if (unnamed_) return;
  // set_variable, not a plain SET: libpqxx sets them again should it reopen the connection.
  if (planning_ == Planning::kPinned) {
    conn.set_variable("enable_seqscan", "off");
    conn.set_variable("enable_bitmapscan", "off");
    conn.set_variable("jit", "off");
    conn.set_variable("plan_cache_mode", "force_generic_plan");
  } else {
    conn.set_variable("plan_cache_mode", "force_custom_plan");
  }
  for (const auto& statement : statements_) conn.prepare(statement.name, statement.sql);
}

const stmt::Statement& StatementSet::find(const char* name) const {
  const auto it = std::find_if(
      statements_.begin(), statements_.end(),
      [&](const stmt::Statement& s) { return std::string_view(s.name) == std::string_view(name); });
  if (it == statements_.end()) throw std::logic_error(std::string("no statement ") + name);
  return *it;
}

}  // namespace pgjobd
