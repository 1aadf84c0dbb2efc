// Prepared or unnamed statements of one store (see the header).
#include "db/statement_set.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>
#include <string_view>

#include "db/pooled_functions.hpp"
#include "db/sql_text.hpp"

namespace pgjobd {

void StatementSet::prepare(pqxx::connection_base& conn) const {
  if (unnamed_) return;
  // set_variable, not a plain SET: libpqxx sets them again should it reopen the connection.
  if (planning_ == Planning::kPinned) {
    for (const auto& [setting, value] : kPinnedSettings) conn.set_variable(setting, value);
  } else {
    conn.set_variable("plan_cache_mode", "force_custom_plan");
  }
  for (const auto& statement : statements_) conn.prepare(statement.name, statement.sql);
}

void StatementSet::resolve_functions(pqxx::connection_base& conn, const std::string& schema) {
  calls_.clear();
  if (!unnamed_ || planning_ != Planning::kPinned) return;
  std::vector<std::string> wanted;
  for (const PooledFunction& function : pooled_functions()) wanted.push_back(function.name);
  pqxx::nontransaction txn(conn);
  const pqxx::result found = txn.exec_params(
      "SELECT p.proname::text, p.pronargs FROM pg_catalog.pg_proc p "
      "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
      "WHERE n.nspname = $1 AND p.proname::text = ANY ($2::text[]) "
      "AND has_function_privilege(p.oid, 'EXECUTE')",
      schema, text_array_literal(wanted));
  for (const PooledFunction& function : pooled_functions()) {
    for (const auto& row : found) {
      if (function.name != row[0].c_str()) continue;
      std::string call = "SELECT * FROM " + quote_identifier(schema) + "." + function.name + "(";
      for (int i = 1; i <= row[1].as<int>(); ++i) {
        call += (i > 1 ? ", $" : "$") + std::to_string(i);
      }
      calls_.emplace_back(function.statement, call + ")");
    }
  }
  if (calls_.size() < pooled_functions().size() && !warned_) {
    warned_ = true;
    spdlog::warn(
        "behind the transaction pooler, {} of the {} hot-path statements are planned at each "
        "execution: schema {} has no function of theirs this session may call (`pgjobd "
        "migrate` with this pgjobd creates them)",
        pooled_functions().size() - calls_.size(), pooled_functions().size(),
        quote_identifier(schema));
  }
}

const stmt::Statement& StatementSet::find(const char* name) const {
  return stmt::statement_named(statements_, name);
}

}  // namespace pgjobd
