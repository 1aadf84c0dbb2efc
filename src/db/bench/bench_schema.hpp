#pragma once
// The benchmark's scratch schema: its DDL and bulk loads, over a connection of its own
// (so its statements are not counted as the engine's). Failures are thrown as DbError.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "pgjobd/config.hpp"

namespace pgjobd {

class DbSession;

class BenchSchema {
 public:
  // Connects as "pgjobd bench" to work on config.schema, whose jobs all get `job_type`.
  BenchSchema(const DatabaseConfig& config, std::string job_type);
  ~BenchSchema();
  BenchSchema(const BenchSchema&) = delete;
  BenchSchema& operator=(const BenchSchema&) = delete;

  // Drops the schema with everything in it and migrates it afresh.
  void recreate();
  void drop();
  // A schema kept from an earlier run: migrated to this version, its jobs not pending
  // deleted; returns how many pending ones it holds, or -1 when there is no such schema.
  long long reuse_pending();
  void truncate();
  // Switches the jobs table's NOTIFY-on-insert trigger on or off.
  void set_notify_trigger(bool enabled);

  // One bulk INSERT of n pending jobs (the caller times it).
  void insert_pending(int n);
  // One bulk INSERT of n jobs already done, as a long-running queue accumulates them.
  void insert_finished(long long n);
  // insert_pending's jobs, due `delay_ms` from now.
  void insert_pending_later(int n, int delay_ms);
  // n due jobs of a type no handler serves, at a higher priority than insert_pending's.
  void insert_unserved(int n);
  // n due jobs of the served type, at a higher priority, in kPausedQueue, which it pauses.
  void insert_paused(int n);
  static constexpr const char* kPausedQueue = "bench-paused";
  // pgjobd_enqueue_workflow(nodes): the id of each node's ref.
  std::map<std::string, std::int64_t> insert_workflow(const std::string& nodes_json);
  // One pending job in its own autocommitted INSERT; returns its id.
  std::int64_t insert_one();
  // Whether any job is left to finish (pending, failed or running).
  bool any_unfinished();
  // The process id of this schema's session's server process.
  int backend_pid();
  // The largest job id (0 for none).
  std::int64_t max_id();
  // The ids of the first and the n-th due job of the bench's type in claim order, which
  // insert_pending numbers consecutively: {0, 0} when fewer are due.
  std::pair<std::int64_t, std::int64_t> first_due_ids(int n);
  // Whether a job with an id in [first, last] is not done yet. Reads every row of the
  // range (78 ms for 100,000 done jobs beside 10,000,000 pending ones).
  bool any_unfinished_between(std::int64_t first, std::int64_t last);
  // The same for a range first_due_ids gave, read cheaply whatever the backlog behind it:
  // a job of the range still running (the index of running rows), or still the first due
  // job in claim order (one probe). A job of the range that went back behind the backlog
  // (released, retried later) is not seen: any_unfinished_between confirms.
  bool first_due_unfinished(std::int64_t first, std::int64_t last);
  // Seconds from the first start to the last finish of the jobs with ids in (after, upto),
  // by the database's clock (started_at, finished_at): what the daemon wrote, completions
  // included.
  double finish_span_seconds(std::int64_t after, std::int64_t upto);
  // Milliseconds from the last finish among the ids in (after, upto) to job `job`'s start,
  // by the database's clock.
  double start_after_ms(std::int64_t job, std::int64_t after, std::int64_t upto);

  // Before a timed phase: VACUUM ANALYZE, then a CHECKPOINT. Returns whether the checkpoint
  // ran: it needs superuser or pg_checkpoint, and after the first refusal (logged as a
  // warning) it is no longer tried.
  bool settle();

 private:
  // n jobs of `type` at `priority` in `queue`, due `delay_ms` from now, one bulk INSERT.
  void insert_due(int n, const std::string& type, int priority,
                  const std::string& queue = "default", int delay_ms = 0);
  // fn() on the session (reopened if an earlier call lost it), with no deadline: a bulk
  // load or VACUUM takes as long as it takes.
  template <typename Fn>
  auto run(Fn&& fn);
  void exec(const std::string& sql);

  std::string schema_;
  std::string table_;  // the quoted schema.jobs
  std::string job_type_;
  std::unique_ptr<DbSession> session_;  // a pointer: its header brings libpqxx
  bool may_checkpoint_ = true;
};

}  // namespace pgjobd
