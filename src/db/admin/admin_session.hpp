#pragma once
// The CLI's session with the database: a connection of its own and the operator actions
// on one schema (migrate, enqueue, stats, retry, cancel, pause, resume). Every database failure is
// thrown as DbError, so the CLI needs no libpqxx.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/admin/limit_stats.hpp"
#include "db/migration_report.hpp"
#include "pgjobd/config.hpp"

namespace pgjobd {

class DbSession;

struct EnqueueRequest {
  std::string type;
  std::string payload = "{}";  // JSON text
  std::string queue = "default";
  int priority = 0;
  std::optional<std::string> run_at;  // any timestamptz input PostgreSQL accepts
  int max_attempts = 5;
  std::optional<std::string> unique_key;
};

struct EnqueueResult {
  std::int64_t id = 0;
  bool created = true;  // false: a live job with the same (type, unique_key) exists: id is it
};

struct StatsRow {
  std::string queue;
  std::string status;
  std::int64_t count = 0;
};

class AdminSession {
 public:
  // Connects to config.url, tagged application_name = "pgjobd <role>", to work on
  // config.schema. Throws DbError with connection_lost() when the server is unreachable
  // (the message never contains the password).
  AdminSession(const DatabaseConfig& config, const std::string& role);
  ~AdminSession();
  AdminSession(const AdminSession&) = delete;
  AdminSession& operator=(const AdminSession&) = delete;

  // Applies the pending migrations (see db/migrator.hpp). Also throws std::runtime_error
  // when the schema is newer than this binary.
  MigrationReport migrate();
  // The version recorded in the schema, 0 when it was never migrated.
  int schema_version();

  // A job from the command line, through pgjobd_enqueue_ex. A value PostgreSQL or the
  // function rejects (an unparseable run_at, a priority out of range) is a DbError whose
  // sqlstate() is of class 22 (data exception).
  EnqueueResult enqueue(const EnqueueRequest& request);
  // Job counts by queue and status, only the combinations that have jobs.
  std::vector<StatsRow> stats();
  // Every limit of the database with its use, by name.
  std::vector<LimitStatsRow> limit_stats();
  // Both return a sentence for the operator; throw std::runtime_error when nothing changed
  // (unknown id, or a status the action does not apply to).
  // retry goes through pgjobd_retry (README "SQL interface"); its errors are DbError.
  std::string retry(std::int64_t id);
  // pgjobd_cancel: a pending or failed job is cancelled, a running one's daemon is asked
  // to stop it. Throws for a finished (done, dead) job or an unknown id.
  std::string cancel(std::int64_t id, const std::optional<std::string>& reason = std::nullopt);
  // pgjobd_pause_queue / pgjobd_resume_queue: idempotent; a sentence for the operator.
  std::string pause_queue(const std::string& queue);
  std::string resume_queue(const std::string& queue);

 private:
  // fn() on the session (reopened if an earlier call lost it), with no deadline: a
  // migration may take as long as it takes.
  template <typename Fn>
  auto run(Fn&& fn);

  std::string schema_;
  std::unique_ptr<DbSession> session_;  // a pointer: its header brings libpqxx
};

}  // namespace pgjobd
