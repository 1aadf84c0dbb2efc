// StatementPlans: PREPARE every statement, then EXPLAIN EXECUTE one under a plan mode.

#include "support/statement_plans.hpp"

#include <pqxx/pqxx>

#include "db/sql_text.hpp"
#include "db/statements.hpp"

namespace pgjobd::testing {

StatementPlans::StatementPlans(TestSchema& schema)
    : conn_(open_connection(schema.config().database, "test-plans")) {
  pqxx::nontransaction txn(*conn_);
  for (const auto& statement : stmt::job_statements(quote_identifier(schema.name()))) {
    txn.exec(std::string("PREPARE ") + statement.name + " AS " + statement.sql);
  }
}

std::string StatementPlans::explain(const std::string& execute, const char* mode) {
  pqxx::nontransaction txn(*conn_);
  txn.exec(std::string("SET plan_cache_mode = ") + mode);
  std::string plan;
  for (const auto& row : txn.exec("EXPLAIN EXECUTE " + execute)) {
    plan += row[0].as<std::string>() + "\n";
  }
  return plan;
}

}  // namespace pgjobd::testing
