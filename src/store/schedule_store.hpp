#pragma once
// The schedules table as the scheduler sees it (README "Recurring jobs"). PgScheduleStore
// (src/db) is the real one; tests use a fake. Every method throws DbError on failure.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgjobd/config.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

using TickTime = std::chrono::sys_seconds;

// When a schedule ticks: exactly one of cron and every_seconds is set.
struct ScheduleTiming {
  std::string cron;
  std::int64_t every_seconds = 0;
  std::string timezone = "UTC";

  bool operator==(const ScheduleTiming&) const = default;
};

enum class MisfirePolicy { kSkip, kAll, kNone };

struct ScheduleRow {
  std::string name;
  ScheduleTiming timing;
  std::string type;
  std::string queue;
  std::string source;  // "yaml" or "sql"
  int priority = 0;
  int max_attempts = 5;
  std::string payload = "{}";  // JSON text
  bool enabled = true;
  bool paused = false;
  bool overlap_skip = false;
  MisfirePolicy misfire = MisfirePolicy::kSkip;
  std::chrono::seconds misfire_grace{3600};
  TickTime last_tick;  // every tick up to here is handled
  std::optional<TickTime> next_tick;

  bool active() const { return enabled && !paused; }
};

MisfirePolicy misfire_policy(std::string_view text);  // "all", "none", else skip

// The row a `schedules:` entry becomes (last_tick, next_tick and paused left as they are):
// the one translation the reconciliation, its fake and the scheduler's check share.
ScheduleRow yaml_schedule_row(const std::string& name, const ScheduleConfig& schedule);

// Whether two rows define the same schedule (their ticks and pause aside); payloads compare
// as JSON values, as the table's jsonb does.
bool same_definition(const ScheduleRow& a, const ScheduleRow& b);

// One step of firing: move last_tick from `expected_last_tick` to `tick`, inserting the
// tick's job when `insert_job` (and, with overlap: skip, the last one is not live).
struct FireRequest {
  std::string name;
  ScheduleTiming timing;  // as the caller computed ticks with; a changed row refuses
  TickTime expected_last_tick;
  TickTime tick;
  std::optional<TickTime> next_tick;  // stored for operators
  bool insert_job = true;
  bool late = false;  // said in the job's payload
};

enum class FireResult {
  kFired,           // the job was inserted
  kSkippedOverlap,  // last_tick moved; no job: the previous one is still live
  kAdvanced,        // last_tick moved; no job asked for (a missed tick)
  kLost,            // last_tick was not expected_last_tick (someone else fired, or the
                    // schedule changed, was paused or removed): nothing written
  kHeld,            // another session holds the row (a daemon firing it, an operator's
                    // open transaction): nothing written, nothing waited for
};

struct ReconcileReport {
  int added = 0;
  int changed = 0;
  int removed = 0;
  std::vector<std::string> held_by_sql;  // YAML names that schedules made by SQL hold
};

class ScheduleStore {
 public:
  virtual ~ScheduleStore() = default;
  virtual std::vector<ScheduleRow> load_schedules() = 0;
  // One transaction; exactly one caller wins each (name, expected_last_tick). Never waits
  // for a row another session holds (kHeld).
  virtual FireResult fire(const FireRequest& request) = 0;
  // The pid of the session holding schedule `name`'s row, when it can be told.
  virtual std::optional<int> row_holder(const std::string& name) = 0;
  // Makes the YAML rows match `schedules` (added, changed, removed); never touches rows
  // of source 'sql'. One transaction, which waits at most kReconcileLockWait for a row
  // another session holds and then fails with DbError, SQLSTATE kLockNotAvailable.
  virtual ReconcileReport reconcile(const std::map<std::string, ScheduleConfig>& schedules) = 0;

  static constexpr std::chrono::milliseconds kReconcileLockWait{1000};
  static constexpr const char* kLockNotAvailable = "55P03";
};

}  // namespace pgjobd
