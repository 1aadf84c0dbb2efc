#pragma once
// One connection's view of the jobs table: claim, complete, heartbeat, rescue, stats.
// Each engine thread that talks to the database owns its own JobStore (libpq
// connections are not shared between threads). Failures surface as DbError, so callers
// need no pqxx headers; the connection is dropped on error and reopened on next use.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "db/connection.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/job.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

struct QueueSlots {
  std::string queue;
  int free = 0;
};

// A finished attempt, as the completer writes it.
struct Completion {
  std::int64_t id = 0;
  int attempt = 0;
  Outcome outcome = Outcome::kDone;
  std::string error;      // retry / dead
  Millis retry_delay{0};  // retry
};

struct CompletionReport {
  int written = 0;
  int stale = 0;  // fenced off: the job is no longer ours (rescued, re-claimed)
};

struct RescueReport {
  bool leader = false;  // this daemon holds the maintenance leadership
  int failed = 0;       // back in the queue for another attempt
  int dead = 0;         // attempts used up
};

struct QueueStatsRow {
  std::string queue;
  std::string status;
  double count = 0;
  double oldest_due_age_seconds = 0;  // 0 when nothing in the group is due
};

// The highest of $1 and $2 a statement uses (0 for neither): the sql handler sends the
// payload as $1 and the job id as $2 only where the statement has those placeholders.
int highest_parameter(std::string_view sql);

class JobStore {
 public:
  // role: this connection's purpose, shown in pg_stat_activity ("fetcher", "completer").
  JobStore(DatabaseConfig config, std::string role);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Opens the connection and prepares statements if not connected. Throws DbError.
  void connect();
  void disconnect();
  bool connected() const;
  // The open connection (connects first); for callers that run their own SQL.
  pqxx::connection_base& connection();

  std::vector<Job> claim(const std::vector<QueueSlots>& slots,
                         const std::vector<std::string>& types, int limit,
                         const std::string& worker_id, Millis lease);

  // Writes a batch in one transaction. delete_done: remove done rows instead of keeping.
  CompletionReport complete(const std::vector<Completion>& batch, const std::string& worker_id,
                            bool delete_done);

  // The sql handler's exactly-once step: in one transaction, runs `sql` with $1 = the
  // payload (jsonb) and $2 = the job id, then marks the job done (or deletes it) fenced by
  // worker and attempt. Returns false, changing nothing, when the job is no longer ours.
  // A request on `stop` cancels the running statement. `timeout` > 0 bounds the statement.
  bool run_and_complete(const std::string& sql, const Job& job, const std::string& worker_id,
                        bool delete_done, Millis timeout, std::stop_token stop);

  // Extends the lease of the given (id, attempt) pairs; returns the ids still ours.
  std::vector<std::int64_t> heartbeat(const std::vector<std::int64_t>& ids,
                                      const std::vector<std::int64_t>& attempts,
                                      const std::string& worker_id, Millis lease);

  // Takes or renews the maintenance leadership for `leadership_ttl` and, when leader,
  // returns up to batch_size jobs whose lease expired to the queue.
  RescueReport lead_and_rescue(const std::string& worker_id, Millis leadership_ttl,
                               const RetryConfig& retry, int batch_size);
  // Hands leadership over at once (a clean shutdown).
  void resign(const std::string& worker_id);

  // Deletes one batch of finished jobs past retention; returns how many.
  int prune(const RetentionConfig& retention, int batch_size);

  // Live (pending, failed, running) jobs by queue and status.
  std::vector<QueueStatsRow> queue_stats();

  // Empty when the schema is current; else what is wrong (never throws for that).
  std::string schema_problem();

  // Statements sent to the server by every JobStore of this process (the benchmark's
  // queries_per_job and idle_queries_per_s).
  static std::uint64_t round_trips();

 private:
  template <typename Fn>
  auto guarded(const char* operation, Fn&& fn);

  DatabaseConfig config_;
  std::string role_;
  ConnectionPtr conn_;
};

}  // namespace pgjobd
