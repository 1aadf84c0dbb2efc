#pragma once
// EXPLAIN of pgjobd's own statements, prepared as the daemon prepares them, for the tests
// that check a statement's plan under both a custom and a generic plan.

#include <array>
#include <string>

#include "db/connection.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {

class StatementPlans {
 public:
  // Both plan cache modes: a daemon's prepared statement may run with either.
  static constexpr std::array<const char*, 2> kModes = {"force_custom_plan", "force_generic_plan"};

  // Prepares every statement of stmt::job_statements for the schema, on a connection of
  // its own.
  explicit StatementPlans(TestSchema& schema);

  // The plan of `EXECUTE <execute>` (a statement name and its arguments, e.g.
  // "pgjobd_heartbeat('{1}', '{1}', 'w', 30000)") under plan_cache_mode = `mode`.
  std::string explain(const std::string& execute, const char* mode);

 private:
  ConnectionPtr conn_;
};

}  // namespace pgjobd::testing
