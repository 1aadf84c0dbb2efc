#pragma once
// The sql handler: runs a statement with $1 = the payload and $2 = the job id in the same
// transaction that marks the job done, so database side effects happen exactly once.

#include <cstddef>
#include <memory>
#include <string>

#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"
#include "store/database.hpp"

namespace pgjobd {

// What the sql handler needs besides its own config: where the jobs table is, who owns
// the claims, and whether done jobs are deleted (retention.done = 0).
struct SqlHandlerContext {
  std::shared_ptr<Database> database;  // opens one store per concurrently running job
  std::string worker_id;
  bool delete_done = false;
  std::size_t max_result_bytes = 0;  // worker.max_result_bytes
};

// Contract:
// - the statement is one statement (config loading checks it; the server refuses more)
//   with $1 = the payload as jsonb and $2 = the job id as bigint, both always sent typed,
//   so it may use either, both or neither;
// - success: the statement's effects and the job's `done` commit together
//   (JobResult::completion_written is set: the completer writes nothing more);
// - the job is no longer ours (rescued, re-claimed): everything is rolled back;
// - an error in the statement rolls it back: a data exception (SQLSTATE class 22, e.g. a
//   payload the statement cannot use) makes the job dead, anything else retries, with the
//   server's message as last_error;
// - `timeout` bounds the statement (statement_timeout); a stop request cancels it and
//   releases the job.
// Connections are pooled: one per concurrently running sql job, reused.
Handler make_sql_handler(const HandlerConfig& config, const SqlHandlerContext& context);

}  // namespace pgjobd
