#pragma once
// The maintenance services' stores (src/engine/maintenance_loop.hpp), one per service: the
// leadership with the rescue, retention, the dependency repair, the queue statistics, the
// daemons table, the dead-letter settings.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

struct RescueReport {
  bool leader = false;  // this daemon holds the maintenance leadership
  int failed = 0;       // back in the queue for another attempt
  int dead = 0;         // attempts used up
  int cancelled = 0;    // pgjobd_cancel had asked for them to stop
};

struct QueueStatsRow {
  std::string queue;
  std::string status;
  double count = 0;
  // The queue's oldest due job's age, on the row of that job's status; 0 on the others.
  double oldest_due_age_seconds = 0;
};

// This daemon, as the dashboard's daemons table shows it (README "Dashboard").
struct DaemonReport {
  std::string id;  // the worker id
  std::string host;
  std::int64_t pid = 0;
  std::string version;
  int concurrency = 0;
  int busy = 0;   // jobs running now
  Millis ttl{0};  // the row stops being shown this long after the report (3 × lease)
};

class LeadershipStore {
 public:
  virtual ~LeadershipStore() = default;

  // Takes or renews the maintenance leadership for `leadership_ttl` and, when leader,
  // returns up to batch_size jobs whose lease expired to the queue (or, when a cancel was
  // requested, ends them cancelled).
  virtual RescueReport lead_and_rescue(const std::string& worker_id, Millis leadership_ttl,
                                       const RetryConfig& retry, int batch_size) = 0;

  // Hands leadership over at once (a clean shutdown).
  virtual void resign(const std::string& worker_id) = 0;

  // Deletes the rows of daemons whose ttl has passed (the leader's upkeep); returns how many.
  virtual int expire_daemons() = 0;
};

class RetentionStore {
 public:
  virtual ~RetentionStore() = default;

  // Deletes one batch of finished jobs past retention; returns how many. Successive calls
  // continue where the last one stopped until one returns fewer than batch_size.
  virtual int prune(const RetentionConfig& retention, int batch_size) = 0;

  // Deletes up to batch_size bucket rows that say nothing any more: partitions of keyed
  // rate limits idle for longer than `idle`. Returns how many.
  virtual int collect_limit_garbage(Millis idle, int batch_size) = 0;
};

class DependencyStore {
 public:
  virtual ~DependencyStore() = default;

  // Resolves up to batch_size parents that ended (or were deleted) while blocked children
  // still wait for them, as the trigger would have (README "Dependencies": triggers off
  // during a restore, session_replication_role = replica). Returns how many parents.
  virtual int repair_dependencies(int batch_size) = 0;
};

class StatisticsStore {
 public:
  virtual ~StatisticsStore() = default;

  // Live (pending, failed, running) and blocked jobs of `queues` by queue and status; other queues'
  // rows are neither returned nor counted. Each group is counted up to kQueueDepthCounted
  // jobs; a larger one gets PostgreSQL's estimate from the table's statistics instead (never
  // below kQueueDepthCounted): counting 10,000,000 pending jobs every 30 s took seconds, and
  // even 100,000 index entries walked under the claims' churn took 0.3-5.5 s.
  static constexpr long long kQueueDepthCounted = 10000;
  virtual std::vector<QueueStatsRow> queue_stats(const std::vector<std::string>& queues) = 0;

  // Those of `queues` that are paused (pgjobd_pause_queue), for the pgjobd_queue_paused
  // gauge. The claim itself skips paused queues; this only reports them.
  virtual std::vector<std::string> paused_queues(const std::vector<std::string>& queues) = 0;

  // Empty when the schema is current; else what is wrong (never throws for that).
  virtual std::string schema_problem() = 0;
};

// A row of pgjobd_dead_letters this daemon's sync replaced or removed, written before by
// another daemon (README "Dead letters"): the two daemons' handlers.TYPE.dead_letter differ.
struct DeadLetterOverwrite {
  std::string type;
  std::string change;  // "changed" or "removed"
  DeadLetterConfig previous;
  std::string previous_writer;
};

class DeadLetterStore {
 public:
  virtual ~DeadLetterStore() = default;

  // Makes pgjobd_dead_letters' rows of `served` (this daemon's handler types) exactly
  // `dead_letters` (type -> target, each type among `served`), marking what it writes as
  // written by `writer`; returns the rows another writer had written differently.
  virtual std::vector<DeadLetterOverwrite> sync_dead_letters(
      const std::map<std::string, DeadLetterConfig>& dead_letters,
      const std::vector<std::string>& served, const std::string& writer) = 0;
};

class DaemonRegistryStore {
 public:
  virtual ~DaemonRegistryStore() = default;

  // Upserts this daemon's row in the daemons table: seen now, shown until report.ttl from
  // now; started_at stays that of the first report.
  virtual void report_daemon(const DaemonReport& report) = 0;

  // Deletes the daemon's row (a clean exit).
  virtual void remove_daemon(const std::string& worker_id) = 0;
};

}  // namespace pgjobd
