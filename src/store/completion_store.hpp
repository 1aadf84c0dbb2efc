#pragma once
// The stores that write a finished attempt: the completer's batches (CompletionStore) and the
// sql handler's statement with its completion in one transaction (SqlJobStore).

#include <cstddef>
#include <stop_token>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "pgjobd/job.hpp"
#include "store/db_error.hpp"
#include "store/job_attempt.hpp"

namespace pgjobd {

// A finished attempt, as the completer writes it.
struct Completion {
  Completion() = default;
  // Without a result: every outcome but a done one with a result (-Wextra would otherwise
  // ask each aggregate initialiser for one).
  Completion(JobAttempt job_, Outcome outcome_, std::string error_, Millis retry_delay_,
             std::string result_ = {})
      : job(job_),
        outcome(outcome_),
        error(std::move(error_)),
        retry_delay(retry_delay_),
        result(std::move(result_)) {}

  JobAttempt job;
  Outcome outcome = Outcome::kDone;
  std::string error;      // retry / dead
  Millis retry_delay{0};  // retry
  // done: jobs.result as jsonb text (stored_result: bounded, storable); empty: NULL.
  std::string result;
};

struct CompletionReport {
  int written = 0;
  int stale = 0;  // fenced off: the job is no longer ours (rescued, re-claimed)
  // Not written because another session holds the row's lock, and still ours (the same
  // attempt, running, locked by this worker): to be sent again later. Neither written nor
  // stale.
  std::vector<JobAttempt> held;
};

class CompletionStore {
 public:
  virtual ~CompletionStore() = default;

  // Writes a batch in one transaction, each fenced by worker and attempt, without waiting
  // (beyond a few tens of milliseconds) for a row another session holds: such rows are
  // left as they are and reported held.
  // delete_done: remove done rows instead of keeping them (retention.done = 0).
  virtual CompletionReport complete(const std::vector<Completion>& batch,
                                    const std::string& worker_id, bool delete_done) = 0;
};

class SqlJobStore {
 public:
  virtual ~SqlJobStore() = default;

  // The sql handler's exactly-once step: in one transaction, runs `sql` with $1 = the
  // payload (jsonb) and $2 = the job id, then marks the job done (or deletes it) fenced by
  // worker and attempt, its result the rows the statement returned (README "sql handler":
  // NULL for none, else an array of objects, column name → value), bounded by
  // max_result_bytes (stored_result; 0: no result). Returns false, changing nothing, when
  // the job is no longer ours. A request on `stop` cancels the running statement.
  // `timeout` > 0 bounds the statement.
  virtual bool run_and_complete(const std::string& sql, const Job& job,
                                const std::string& worker_id, bool delete_done, Millis timeout,
                                std::size_t max_result_bytes, std::stop_token stop) = 0;
};

}  // namespace pgjobd
