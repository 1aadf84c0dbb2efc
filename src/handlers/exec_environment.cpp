// Builds the child environment: the daemon's environ (less its own secrets and control
// channels) plus PGJOBD_JOB_* for the job.

#include "handlers/exec_environment.hpp"

#include <array>
#include <string_view>

extern char** environ;

namespace pgjobd {
namespace {

// Replaced per job, or the daemon's own: its database credentials (PGJOBD_DATABASE_URL;
// DATABASE_URL stays, by convention it is the application's) and systemd's control
// channel, which a child must not use to speak for the daemon.
constexpr std::array<std::string_view, 8> kWithheldVariables = {
    "PGJOBD_JOB_ID",       "PGJOBD_JOB_TYPE", "PGJOBD_JOB_QUEUE", "PGJOBD_JOB_ATTEMPT",
    "PGJOBD_DATABASE_URL", "NOTIFY_SOCKET",   "WATCHDOG_USEC",    "WATCHDOG_PID"};

bool names_withheld_variable(std::string_view entry) {
  const auto equals = entry.find('=');
  const std::string_view name = entry.substr(0, equals);
  for (const std::string_view variable : kWithheldVariables) {
    if (name == variable) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> build_child_environment(const Job& job) {
  std::vector<std::string> environment;
  // The daemon never changes its environment after start-up, so reading environ from a
  // worker thread does not race with setenv.
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!names_withheld_variable(*entry)) environment.emplace_back(*entry);
  }
  environment.push_back("PGJOBD_JOB_ID=" + std::to_string(job.id));
  environment.push_back("PGJOBD_JOB_TYPE=" + job.type);
  environment.push_back("PGJOBD_JOB_QUEUE=" + job.queue);
  environment.push_back("PGJOBD_JOB_ATTEMPT=" + std::to_string(job.attempt));
  return environment;
}

}  // namespace pgjobd
