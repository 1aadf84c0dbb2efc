#pragma once
// The database as the engine sees it: a source of job stores (one per thread that needs
// a connection), of LISTEN sessions, and the schema check at start-up. The engine is
// given one (PgDatabase in production) and hands each part what it needs.

#include <functional>
#include <memory>
#include <string>

#include "store/db_error.hpp"
#include "store/job_store.hpp"
#include "store/schedule_store.hpp"

namespace pgjobd {

// What a notification says.
enum class NotifyChannel {
  kJobs,    // jobs were inserted (or a queue resumed): claim
  kCancel,  // pgjobd_cancel marked a running job: heartbeat to learn which
  kLimits,  // pgjobd_limits_sync changed the limits: read them again
};

// One LISTEN session on pgjobd's channels.
class Notifications {
 public:
  virtual ~Notifications() = default;
  // A descriptor that becomes readable when something arrives (poll it with POLLIN).
  virtual int socket() const = 0;
  // Reads what arrived and calls on_notify once per notification for this schema, with the
  // server process that sent it (0: not known). Throws DbError when the session is lost.
  virtual void consume(const std::function<void(NotifyChannel, int sender_pid)>& on_notify) = 0;
};

struct SchemaReport {
  int from_version = 0;  // before migrating (equal to to_version when nothing was applied)
  int to_version = 0;
  std::string problem;   // empty when the schema is at this binary's version
  bool stopped = false;  // stop_requested() while waiting for the migration lock
};

// What a store's connection will run, which decides how its statements are planned
// (PgJobStore; StatementSet says why).
enum class StoreUse {
  // Now and then, or statements that are not pgjobd's own (the sql handler's): each
  // execution planned for the table as it is then.
  kOccasional,
  // The claim and the completions, many times a second: each statement planned once per
  // connection, on the indexes it is meant to use whatever the table holds.
  kHotPath,
};

class Database {
 public:
  virtual ~Database() = default;
  // A store whose connection carries `role` in pg_stat_activity ("fetcher"). Connects on
  // first use, so this never blocks.
  virtual std::unique_ptr<JobStore> open_store(const std::string& role, StoreUse use) = 0;
  // The schedules table over a connection of its own, opened on first use.
  virtual std::unique_ptr<ScheduleStore> open_schedule_store(const std::string& role) = 0;
  // Connects and LISTENs. Throws DbError.
  virtual std::unique_ptr<Notifications> listen() = 0;
  // One attempt: applies pending migrations when `migrate`, then checks the schema.
  // Throws DbError (connection_lost() when the server was not reachable). The session it
  // used may serve the next store opened for StoreUse::kHotPath (PgDatabase does so).
  // Waiting for another session's migration lock ends, with `stopped`, once
  // stop_requested() is true.
  virtual SchemaReport prepare_schema(bool migrate,
                                      const std::function<bool()>& stop_requested) = 0;
  // From now on no call waits longer than `cap` for its answer, those in flight included,
  // except an sql handler's own statement (a drain: see Engine::drain). The default does
  // nothing.
  virtual void shorten_calls(Millis /*cap*/) {}
};

}  // namespace pgjobd
