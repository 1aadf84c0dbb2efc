#pragma once
// The stores that write a finished attempt: the completer's batches (CompletionStore) and the
// sql handler's statement with its completion in one transaction (SqlJobStore).

#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <string>
#include <utility>
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
  Completion(JobAttempt attempt, Outcome ended_as, std::string why, Millis delay,
             std::string returned = {})
      : job(attempt),
        outcome(ended_as),
        error(std::move(why)),
        retry_delay(delay),
        result(std::move(returned)) {}

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
  // Blocked children whose last parent this write ended done: the database makes them
  // pending as it commits (due at once unless their run_at is later), and NOTIFYs; the
  // daemon claims them by id (Fetcher) and its listener ignores that NOTIFY (notify_pid).
  std::vector<std::int64_t> unblocked;
  // The write may have made other jobs due, announced by a NOTIFY from notify_pid (a
  // parent's dead or cancelled end resolving its children, a dead letter): the daemon
  // claims as for any NOTIFY. Also set when the children were resolved by the row
  // triggers (a write skipping held rows), which say nothing of them here.
  bool other_due = false;
  // The server process of the session that wrote, whose NOTIFYs of new jobs the daemon's
  // listener may ignore, as the fields above tell of them; 0 when they must not be
  // ignored (a write that resolved no children itself, a transaction pooler's session).
  int notify_pid = 0;
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
