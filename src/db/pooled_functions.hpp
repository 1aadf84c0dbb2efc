#pragma once
// Plans kept behind a transaction pooler (database.pooler: transaction). There a session
// cannot keep a prepared statement (its next transaction may run on another server
// connection), so every statement is parsed and planned at each execution: the claim and
// the completion, each planned in 0.4-0.7 ms, took about 6% of PostgreSQL's CPU in a
// benchmark run of four daemons (bench/README.md, "Through PgBouncer"). A PL/pgSQL
// function keeps the plans of the statements it runs for as long as its server connection
// lives, whichever client calls it. So `pgjobd migrate` wraps each hot-path statement in
// a function of the schema, which runs it under the pinned planner settings
// (kPinnedSettings, statement_set.hpp), set for the call only; a hot-path session behind a
// pooler calls the function, and sends the statement itself when the schema lacks it.
//
// A function is named for the text of its statement (the schema left out): a binary whose
// statement differs calls a function of its own, and two binaries of one schema version
// can run side by side (a rolling upgrade). Functions no binary of the schema's version
// can call are dropped when a migration raises the version.

#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace pgjobd {

struct PooledFunction {
  const char* statement;  // the statement's name (stmt::kClaim, ...)
  // pgjobd_pooled_<the statement's name without "pgjobd_">_<12 hex digits of its text>
  std::string name;
};

// The statements kept behind a pooler, each with its function's name: the same for every
// schema.
const std::vector<PooledFunction>& pooled_functions();

// A digest of the functions' names (and so of their statements' text), recorded by the
// migrator with the digest of sql/functions/: a binary whose statements differ applies
// its own.
std::string pooled_functions_digest();

// In the migration's transaction: creates or replaces the function of each statement in
// `schema` (unquoted). With drop_others, drops every other pgjobd_pooled_ function of the
// schema.
void apply_pooled_functions(pqxx::dbtransaction& txn, const std::string& schema, bool drop_others);

}  // namespace pgjobd
