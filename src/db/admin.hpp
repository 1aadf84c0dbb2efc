#pragma once
// Operator actions on the jobs table, used by the CLI: enqueue, stats, retry, cancel.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
}

namespace pgjobd {

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

EnqueueResult enqueue_job(pqxx::connection_base& conn, const std::string& schema,
                          const EnqueueRequest& request);

struct StatsRow {
  std::string queue;
  std::string status;
  std::int64_t count = 0;
};
std::vector<StatsRow> job_stats(pqxx::connection_base& conn, const std::string& schema);

// Both return a sentence for the operator; throw std::runtime_error when nothing changed
// (unknown id, or a status the action does not apply to).
std::string retry_job(pqxx::connection_base& conn, const std::string& schema, std::int64_t id);
std::string cancel_job(pqxx::connection_base& conn, const std::string& schema, std::int64_t id);

}  // namespace pgjobd
