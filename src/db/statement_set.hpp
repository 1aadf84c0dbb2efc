#pragma once
// A store's statements (statements.cpp) on its connection: prepared by name once per
// connection, or, behind a transaction pooler (database.pooler: transaction), sent unnamed
// each time. There the next transaction may run on another server connection, where a
// statement prepared by name does not exist (or another client's of the same name does);
// an unnamed statement (PQexecParams) is parsed and planned every time, a cost measured in
// the README's PgBouncer section.
//
// PostgreSQL makes a prepared statement's generic plan once, after five executions, for
// the table's size at that moment, and keeps it until something invalidates it (an
// ANALYZE or VACUUM of the table, or DDL). Made while `jobs` was nearly empty (a new
// schema, or a quiet table that retention had emptied when autovacuum last came by), it
// reads rows with a sequential scan, and kept doing so as the table grew: the claim once
// fell to 100 jobs/s that way, and the completion scanned the whole table for every batch
// (7 ms each at about 40,000 rows, half a CPU in a stream of 1,000 jobs/s). So no session
// of the daemon leaves the choice to PostgreSQL:
//
// - Planned at each execution (Planning::kEachExecution: plan_cache_mode =
//   force_custom_plan), for sessions that run a statement now and then, or run SQL that
//   is not ours (the sql handler's): every plan fits the table as it is.
// - Pinned (Planning::kPinned), for the claim's and the completions' sessions, which run
//   their few statements hundreds of times a second: there, planning at each execution took
//   over half of the claimer's backend CPU in a stream of small claims (the claim and
//   next_due are large statements to plan), CPU the producers' INSERTs on the same machine
//   waited for. The session plans each statement once (plan_cache_mode =
//   force_generic_plan; again only after an ANALYZE or VACUUM of the table) with sequential
//   and bitmap scans switched off (enable_seqscan, enable_bitmapscan), so that the one plan
//   is the one made for a large table, however small the table is when it is made: the
//   claim walks jobs_claim_idx in claim order, and rows are found by id through jobs_pkey
//   (the claim's UPDATE: by the ctid it locked them at).
//   Its estimates may be those of an empty table, so such a statement must have no choice
//   that depends on them (the claim's comment tells of a join that did). Every statement
//   such a session runs has its pinned plan checked on a table planned while empty
//   (JobStore.NoSessionKeepsAPlanMadeWhileTheTableWasEmpty). A switched-off scan is not
//   forbidden, only costed at 10^10, so a sequential scan nothing can replace (the limited
//   claim reads the small pgjobd_limits whole) looks expensive enough for JIT compilation,
//   155 ms at each execution: jit is off too (OLTP statements gain nothing from it). Such a
//   session must not run anyone else's SQL, which these switches would mislead.
//
// Behind a pooler (unnamed), nothing is set: the next transaction may run on a server
// connection another client uses, and an unnamed statement is planned at each execution.
// A pinned set's hot statements are called there through the functions `pgjobd migrate`
// made of them (pooled_functions.hpp), which keep their plans per server connection under
// the same settings, set for the call only; a statement without its function in the schema
// goes unnamed. bench/README.md measures what each choice costs.

#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "db/statements.hpp"

namespace pgjobd {

enum class Planning { kEachExecution, kPinned };

// The planner settings of a pinned session, and of the functions that run its statements
// behind a pooler.
inline constexpr std::pair<const char*, const char*> kPinnedSettings[] = {
    {"enable_seqscan", "off"},
    {"enable_bitmapscan", "off"},
    {"jit", "off"},
    {"plan_cache_mode", "force_generic_plan"},
};

class StatementSet {
 public:
  StatementSet(std::vector<stmt::Statement> statements, bool unnamed, Planning planning)
      : statements_(std::move(statements)), unnamed_(unnamed), planning_(planning) {}

  // On a new connection: sets the planner's session settings for `planning` and prepares
  // every statement, unless they go unnamed (behind a pooler, where a session setting
  // would reach other clients).
  void prepare(pqxx::connection_base& conn) const;

  // Behind a pooler, for a pinned set, on each connection the session opens (after
  // prepare(), on the thread that executes): finds which of the statements' functions
  // `schema` (unquoted) holds that this session may call, and calls those from now on.
  // The first time some are missing, says so.
  void resolve_functions(pqxx::connection_base& conn, const std::string& schema);

  template <typename... Args>
  pqxx::result execute(pqxx::transaction_base& txn, const char* name, Args&&... args) const {
    const stmt::Statement& statement = find(name);
    if (!unnamed_) return txn.exec_prepared(name, std::forward<Args>(args)...);
    for (const auto& [kept, call] : calls_) {
      if (std::string_view(kept) == statement.name) {
        return txn.exec_params(call, std::forward<Args>(args)...);
      }
    }
    return txn.exec_params(statement.sql, std::forward<Args>(args)...);
  }

 private:
  // Throws std::logic_error for a name not in the set.
  const stmt::Statement& find(const char* name) const;

  std::vector<stmt::Statement> statements_;
  bool unnamed_;
  Planning planning_;
  // Behind a pooler: the statements sent as a call of their function, with that call.
  std::vector<std::pair<const char*, std::string>> calls_;
  bool warned_ = false;
};

}  // namespace pgjobd
