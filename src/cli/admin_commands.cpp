// The short-lived subcommands: migrate, check-config, enqueue, stats, retry, cancel, pause,
// resume.

#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.hpp"
#include "cli/config_loading.hpp"
#include "db/admin/admin_session.hpp"
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
    if (e.connection_lost()) {
      std::cerr << "error: cannot connect to " << mask_password(config->database.url) << ": "
                << mask_password(e.what()) << "\n";
    } else {
      std::cerr << "error: " << e.what() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return kExitFailure;
}

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

int run_check_config(const std::string& config_path) {
  const auto config = load_config_or_report(config_path);
  if (!config) return kExitUsage;
  std::cout << config_path << ": ok (" << config->handlers.size() << " handler(s), "
            << config->worker.queues.size() << " queue(s), database "
            << mask_password(config->database.url) << ")\n";
  return kExitOk;
}

int run_enqueue(const std::string& config_path, const EnqueueRequest& request) {
  if (!nlohmann::json::accept(request.payload)) {
    std::cerr << "error: payload is not valid JSON: " << request.payload << "\n";
    return kExitUsage;
  }
  return with_database(config_path, "enqueue", [&](const Config&, AdminSession& session) {
    EnqueueResult result;
    try {
      result = session.enqueue(request);
    } catch (const DbError& e) {
      // A bad value from the command line (an unparseable --run-at, SQLSTATE class 22):
      // a usage error, like bad JSON.
      if (e.sqlstate().rfind("22", 0) != 0) throw;
      std::cerr << "error: invalid job: " << e.what();
      return kExitUsage;
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
    static const char* kStatuses[] = {"pending", "running", "failed", "done", "dead", "cancelled"};
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

// A queue name the functions refuse (empty, over 200 characters) is bad input on the
// command line: a usage error, like a bad --priority.
template <typename Action>
int queue_action(const std::string& config_path, const char* role, const std::string& queue,
                 Action&& action) {
  return with_database(config_path, role, [&](const Config&, AdminSession& session) {
    try {
      std::cout << action(session, queue) << "\n";
    } catch (const DbError& e) {
      if (e.sqlstate().rfind("22", 0) != 0) throw;
      std::cerr << "error: " << e.what();
      return kExitUsage;
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
