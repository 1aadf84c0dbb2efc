#pragma once
// A store's statements (statements.cpp) on its connection: prepared by name once per
// connection, or, behind a transaction pooler (database.pooler: transaction), sent unnamed
// each time. There the next transaction may run on another server connection, where a
// statement prepared by name does not exist (or another client's of the same name does);
// an unnamed statement (PQexecParams) is parsed and planned every time, a cost measured in
// the README's PgBouncer section.

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

  // On a new connection: prepares every statement, unless they go unnamed (all of them
  // behind a pooler; those marked Statement::replan everywhere).
  void prepare(pqxx::connection_base& conn) const;

  template <typename... Args>
  pqxx::result execute(pqxx::transaction_base& txn, const char* name, Args&&... args) const {
    const stmt::Statement& statement = find(name);
    if (!unnamed_ && !statement.replan) return txn.exec_prepared(name, std::forward<Args>(args)...);
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
