#pragma once
// What the dashboard (README "Dashboard") reads and does, as one seam: src/db/ui/pg_ui_store
// implements it over PostgreSQL; tests/support has a fake so the web layer (src/ui/) is
// unit-tested without a server. Every read runs under a short statement_timeout; every
// action goes through the SQL interface's functions (pgjobd_retry_many, pgjobd_cancel_many,
// pgjobd_pause_queue, ...) and writes one audit row in the same transaction. Methods throw
// DbError on failure. A store is used by one thread at a time.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/db_error.hpp"

namespace pgjobd::ui {

// Every status a job can have, in the order the dashboard lists them.
inline constexpr std::array<std::string_view, 7> kJobStatuses = {
    "pending", "running", "failed", "done", "dead", "cancelled", "blocked"};

// A count that stops at a bound: "10,000+" rather than a scan of millions of rows.
struct BoundedCount {
  std::int64_t value = 0;
  bool at_least = false;  // value is the bound: there are more

  bool operator==(const BoundedCount&) const = default;
};

struct QueueOverview {
  std::string queue;
  bool paused = false;
  BoundedCount pending, running, failed, done, dead, cancelled, blocked;
  double oldest_due_age_seconds = 0;  // 0 when nothing is due

  bool operator==(const QueueOverview&) const = default;
};

// One minute of the last hour: jobs finished done, and attempts that failed (retry or dead).
struct MinuteBucket {
  std::int64_t minute_epoch = 0;  // start of the minute, seconds since 1970 (UTC)
  std::int64_t done = 0;
  std::int64_t failed = 0;

  bool operator==(const MinuteBucket&) const = default;
};

// A live daemon, from the daemons table each daemon keeps fresh (dead ones age out).
struct DaemonInfo {
  std::string id;  // the worker id (host:pid:...) that appears in locked_by
  std::string host;
  std::int64_t pid = 0;
  std::string version;
  int concurrency = 0;
  int busy = 0;
  bool leader = false;
  double started_seconds_ago = 0;
  double seen_seconds_ago = 0;

  bool operator==(const DaemonInfo&) const = default;
};

struct Overview {
  std::vector<QueueOverview> queues;
  std::vector<MinuteBucket> last_hour;  // oldest first, minutes with nothing included as zeros
  std::vector<DaemonInfo> daemons;
};

struct JobFilter {
  std::optional<std::string> status;  // one of kJobStatuses
  std::optional<std::string> queue;
  std::optional<std::string> type;
  std::optional<std::int64_t> id;         // exactly this job
  std::optional<std::int64_t> before_id;  // keyset page: ids below this one (newest first)
  int limit = 50;                         // 1..200
};

struct JobSummary {
  std::int64_t id = 0;
  std::string queue, type, status;
  int priority = 0;
  int attempts = 0, max_attempts = 0;
  std::string run_at, created_at;  // ISO 8601, UTC
  std::string finished_at;         // empty while not finished
  std::string last_error;          // first 200 characters

  bool operator==(const JobSummary&) const = default;
};

struct JobPage {
  std::vector<JobSummary> jobs;             // newest first (id descending)
  std::optional<std::int64_t> next_before;  // the next page's before_id, if there is one
};

struct AttemptInfo {
  int attempt = 0;
  std::string worker;  // who ran it (locked_by)
  std::string started_at, finished_at;
  double seconds = 0;
  std::string outcome;  // done, failed, dead, released, cancelled, lease_expired, running
  std::string error;
};

// A job's parent or child (README "Results and workflows"): the job may be gone (retention,
// a delete), its type and status then "".
struct JobLink {
  std::int64_t id = 0;
  std::string type, status;
  std::string parent_status;  // parents only: what the parent ended as, "" while it runs

  bool operator==(const JobLink&) const = default;
};

// How much of a payload's or result's JSON text the store fetches: a page shows at most
// 48 KB of it (pages.cpp), so a 100 MB payload costs the daemon 64 K characters, not 100 MB.
inline constexpr std::size_t kJsonTextSent = 64 * 1024;

struct JobDetail {
  JobSummary summary;
  // JSON text as PostgreSQL writes it, at most kJsonTextSent characters of it (the rest
  // never leaves the server); absent when not shown, or for a result, when none.
  std::optional<std::string> payload_json;
  std::optional<std::string> result_json;
  bool payload_cut = false, result_cut = false;  // longer than kJsonTextSent characters
  // The first few (by id) of the jobs it depends on and of those depending on it, and how
  // many there are.
  std::vector<JobLink> parents, children;
  BoundedCount parents_total, children_total;
  std::string locked_by, locked_until;  // the lease holder while running
  std::string started_at, updated_at;
  std::string unique_key;
  bool cancel_requested = false;
  std::string cancel_reason;
  std::vector<AttemptInfo> attempts;  // oldest first, the running one last
};

struct QueueInfo {
  std::string queue;
  bool paused = false;
  std::string updated_at;  // when last paused or resumed, empty if never
};

// A limit from the limits table (README "Limits"), with its use now.
struct LimitInfo {
  std::string name;
  std::string definition;    // human-readable: "types [a, b], key user, concurrency 3"
  std::int64_t running = 0;  // slots held, all partitions
  std::int64_t partitions = 0;
};

struct ScheduleInfo {
  std::string name;
  std::string timing;  // the cron line or "every 5m", with its time zone
  std::string type, queue;
  bool enabled = true, paused = false;
  std::string last_tick, next_tick;  // ISO 8601, empty when none
};

// Who did what, written with each action.
struct Actor {
  std::string user;
  std::string remote_address;
};

struct ActionResult {
  int changed = 0;      // jobs (or queues, schedules) the action changed
  int unchanged = 0;    // asked for but left as they were (already finished, not found)
  std::string message;  // a sentence for the page
};

struct AuditEntry {
  std::int64_t id = 0;
  std::string at, user, remote_address, action, target;
  std::vector<std::int64_t> job_ids;
  std::string detail;
};

class UiStore {
 public:
  virtual ~UiStore() = default;

  // Returns when the database answers and holds the dashboard's tables (the dashboard's
  // /readyz), else throws DbError.
  virtual void ping() = 0;
  virtual Overview overview() = 0;
  virtual JobPage jobs(const JobFilter& filter) = 0;
  // with_payload false: payload_json and result_json stay empty (ui.show_payloads: false).
  virtual std::optional<JobDetail> job(std::int64_t id, bool with_payload) = 0;
  virtual std::vector<QueueInfo> queues() = 0;
  virtual std::vector<LimitInfo> limits() = 0;
  virtual std::vector<ScheduleInfo> schedules() = 0;
  virtual std::vector<AuditEntry> audit(int limit) = 0;

  virtual ActionResult retry(const std::vector<std::int64_t>& ids, const Actor& actor) = 0;
  virtual ActionResult cancel(const std::vector<std::int64_t>& ids, const std::string& reason,
                              const Actor& actor) = 0;
  virtual ActionResult pause_queue(const std::string& queue, const Actor& actor) = 0;
  virtual ActionResult resume_queue(const std::string& queue, const Actor& actor) = 0;
  virtual ActionResult pause_schedule(const std::string& name, const Actor& actor) = 0;
  virtual ActionResult resume_schedule(const std::string& name, const Actor& actor) = 0;
};

}  // namespace pgjobd::ui
