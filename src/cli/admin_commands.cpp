// The short-lived subcommands: migrate, check-config, enqueue, stats, retry, cancel, pause,
// resume.

#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.hpp"
#include "cli/config_loading.hpp"
#include "cli/error_output.hpp"
#include "db/admin/admin_session.hpp"
#include "log/conninfo_display.hpp"
#include "log/logging.hpp"
#include "store/db_error.hpp"

namespace pgjobd {
namespace {

// Runs an action against the database with the config's connection settings; turns
// database and action errors into a message on stderr and exit code 1.
template <typename Action>
int with_database(const std::string& config_path, const char* role, Action&& action) {
  const auto config = load_config_or_report(config_path);
  if (!config) return kExitUsage;
  setup_logging(config->log);
  try {
    AdminSession session(config->database, role);
    return action(*config, session);
  } catch (const DbError& e) {
    return print_db_error(e, config->database, kExitFailure);
  } catch (const std::exception& e) {
    return print_error(e.what(), kExitFailure);
  }
}

// A value the SQL interface refuses (SQLSTATE class 22, data exception) came from the
// command line: a usage error, like bad JSON or a bad --priority.
bool bad_input(const DbError& e) { return e.sqlstate().rfind("22", 0) == 0; }

}  // namespace

int run_migrate(const std::string& config_path) {
  return with_database(config_path, "migrate", [](const Config& config, AdminSession& session) {
    const auto report = session.migrate();
    if (report.from_version == report.to_version) {
      std::cout << "schema " << config.database.schema << " is up to date (version "
                << report.to_version << ")\n";
    } else {
      std::cout << "schema " << config.database.schema << " migrated from version "
                << report.from_version << " to " << report.to_version << "\n";
    }
    return kExitOk;
  });
}

int run_check_config(const std::string& config_path, ConfigUse for_use) {
  const auto config = load_config_or_report(config_path, for_use);
  if (!config) return kExitUsage;
  std::cout << config_path << ": ok";
  if (for_use == ConfigUse::kDashboard) {
    std::cout << " for the dashboard alone (ui.listen " << config->ui.listen << ", ";
  } else {
    std::cout << " (" << config->handlers.size() << " handler(s), " << config->worker.queues.size()
              << " queue(s), ";
  }
  std::cout << "database " << describe_conninfo(config->database.url) << ")\n";
  return kExitOk;
}

int run_enqueue(const std::string& config_path, const EnqueueRequest& request) {
  if (!nlohmann::json::accept(request.payload)) {
    return print_error("payload is not valid JSON: " + request.payload, kExitUsage);
  }
  return with_database(config_path, "enqueue", [&](const Config&, AdminSession& session) {
    EnqueueResult result;
    try {
      result = session.enqueue(request);
    } catch (const DbError& e) {
      if (!bad_input(e)) throw;  // an unparseable --run-at, a queue name too long, ...
      return print_error(std::string("invalid job: ") + e.what(), kExitUsage);
    }
    if (result.created) {
      std::cout << result.id << "\n";
    } else {
      std::cerr << "a live job of type " << request.type << " with unique key "
                << request.unique_key.value_or("") << " already exists: id " << result.id << "\n";
      std::cout << result.id << "\n";
    }
    return kExitOk;
  });
}

int run_stats(const std::string& config_path, bool json) {
  return with_database(config_path, "stats", [&](const Config&, AdminSession& session) {
    const auto rows = session.stats();
    if (json) {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& row : rows) out[row.queue][row.status] = row.count;
      std::cout << out.dump() << "\n";
      return kExitOk;
    }
    // blocked last: a script that reads the columns by position keeps reading the others.
    static const char* kStatuses[] = {"pending", "running",   "failed", "done",
                                      "dead",    "cancelled", "blocked"};
    std::map<std::string, std::map<std::string, std::int64_t>> table;
    for (const auto& row : rows) table[row.queue][row.status] = row.count;
    std::printf("%-20s", "queue");
    for (const char* status : kStatuses) std::printf(" %10s", status);
    std::printf("\n");
    for (const auto& [queue, counts] : table) {
      std::printf("%-20s", queue.c_str());
      for (const char* status : kStatuses) {
        const auto it = counts.find(status);
        std::printf(" %10lld", static_cast<long long>(it == counts.end() ? 0 : it->second));
      }
      std::printf("\n");
    }
    const auto limits = session.limit_stats();
    if (!limits.empty()) {
      std::printf("\n%-20s %10s %10s  %s\n", "limit", "running", "partitions", "definition");
      for (const auto& limit : limits) {
        std::printf("%-20s %10lld %10lld  %s\n", limit.name.c_str(),
                    static_cast<long long>(limit.running), static_cast<long long>(limit.partitions),
                    limit.definition.c_str());
      }
    }
    return kExitOk;
  });
}

int run_retry(const std::string& config_path, std::int64_t id) {
  return with_database(config_path, "retry", [&](const Config&, AdminSession& session) {
    std::cout << session.retry(id) << "\n";
    return kExitOk;
  });
}

int run_cancel(const std::string& config_path, std::int64_t id,
               const std::optional<std::string>& reason) {
  return with_database(config_path, "cancel", [&](const Config&, AdminSession& session) {
    std::cout << session.cancel(id, reason) << "\n";
    return kExitOk;
  });
}

// A queue name the functions refuse (empty, over 200 characters) is bad input.
template <typename Action>
int queue_action(const std::string& config_path, const char* role, const std::string& queue,
                 Action&& action) {
  return with_database(config_path, role, [&](const Config&, AdminSession& session) {
    try {
      std::cout << action(session, queue) << "\n";
    } catch (const DbError& e) {
      if (!bad_input(e)) throw;
      return print_error(e.what(), kExitUsage);
    }
    return kExitOk;
  });
}

int run_pause(const std::string& config_path, const std::string& queue) {
  return queue_action(config_path, "pause", queue,
                      [](AdminSession& session, const auto& q) { return session.pause_queue(q); });
}

int run_resume(const std::string& config_path, const std::string& queue) {
  return queue_action(config_path, "resume", queue,
                      [](AdminSession& session, const auto& q) { return session.resume_queue(q); });
}

}  // namespace pgjobd
