#pragma once
// The roles of sql/grants.sql for one test: a runtime, a producer and an operator role made
// for it (LOGIN, named after the test's pid and `tag`), the shipped grants file applied with
// psql exactly as an operator would, and everything dropped again at the end.

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "db/sql_text.hpp"
#include "support/build_paths.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {

class GrantsRoles {
 public:
  GrantsRoles(TestSchema& schema, const std::string& tag)
      : runtime("pgjobd_rt_" + tag + "_" + std::to_string(getpid())),
        producer("pgjobd_producer_" + tag + "_" + std::to_string(getpid())),
        operator_role("pgjobd_operator_" + tag + "_" + std::to_string(getpid())),
        schema_(schema) {
    for (const auto& role : {runtime, producer, operator_role}) {
      schema_.exec("DROP ROLE IF EXISTS " + quote_identifier(role));
      schema_.exec("CREATE ROLE " + quote_identifier(role) + " LOGIN");
    }
    command_ = "psql -q -X '" + test_database_url() + "' -v schema=" + schema_.name() +
               " -v runtime_role=" + runtime + " -v producer_role=" + producer +
               " -v operator_role=" + operator_role + " -f " + source_path("sql/grants.sql");
    applied_ = std::system(command_.c_str()) == 0;
  }
  ~GrantsRoles() {
    for (const auto& role : {runtime, producer, operator_role}) {
      schema_.exec("DROP OWNED BY " + quote_identifier(role));
      schema_.exec("DROP ROLE " + quote_identifier(role));
    }
  }
  GrantsRoles(const GrantsRoles&) = delete;
  GrantsRoles& operator=(const GrantsRoles&) = delete;

  // Whether psql applied the file; command() for the failure message.
  bool applied() const { return applied_; }
  const std::string& command() const { return command_; }

  const std::string runtime;
  const std::string producer;
  const std::string operator_role;

 private:
  TestSchema& schema_;
  std::string command_;
  bool applied_ = false;
};

}  // namespace pgjobd::testing
