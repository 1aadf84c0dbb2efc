#pragma once
// A store's statements (statements.cpp) on its connection: prepared by name once per
// connection, or, behind a transaction pooler (database.pooler: transaction), sent unnamed
// each time. There the next transaction may run on another server connection, where a
// statement prepared by name does not exist (or another client's of the same name does);
// an unnamed statement (PQexecParams) is parsed and planned every time, a cost measured in
// the README's PgBouncer section.
//
// Either way every execution is planned for the table as it is then, never from a cached
// generic plan. PostgreSQL makes a prepared statement's generic plan once, after five
// executions, for the table's size at that moment, and keeps it until something
// invalidates it (an ANALYZE or VACUUM of the table, or DDL). Made while `jobs` was
// nearly empty (a new schema, or a quiet table that retention had emptied when autovacuum
// last came by), it reads rows by id with a sequential scan, and kept doing so as the
// table grew: the claim once fell to 100 jobs/s that way, and the completion scanned the
// whole table for every batch (7 ms each at about 40,000 rows, half a CPU in a stream of
// 1,000 jobs/s). So a named session sets plan_cache_mode = force_custom_plan: statements
// are still parsed once per connection, and planned at each execution (bench/README.md
// measures what that costs).

#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "db/statements.hpp"

namespace pgjobd {

class StatementSet {
 public:
  StatementSet(std::vector<stmt::Statement> statements, bool unnamed)
      : statements_(std::move(statements)), unnamed_(unnamed) {}

  // On a new connection: sets plan_cache_mode and prepares every statement, unless they go
  // unnamed (behind a pooler, where a session setting would reach other clients).
  void prepare(pqxx::connection_base& conn) const;

  template <typename... Args>
  pqxx::result execute(pqxx::transaction_base& txn, const char* name, Args&&... args) const {
    const stmt::Statement& statement = find(name);
    if (!unnamed_) return txn.exec_prepared(name, std::forward<Args>(args)...);
    return txn.exec_params(statement.sql, std::forward<Args>(args)...);
  }

 private:
  // Found by text: the same name's literal may sit at another address in another object
  // file. Throws std::logic_error for a name not in the set.
  const stmt::Statement& find(const char* name) const;

  std::vector<stmt::Statement> statements_;
  bool unnamed_;
};

}  // namespace pgjobd
