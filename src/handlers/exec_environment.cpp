// Builds the child environment: the daemon's environ plus PGJOBD_JOB_* for the job.

#include "handlers/exec_environment.hpp"

#include <array>
#include <string_view>

extern char** environ;

namespace pgjobd {
namespace {

constexpr std::array<std::string_view, 4> kJobVariables = {
    "PGJOBD_JOB_ID", "PGJOBD_JOB_TYPE", "PGJOBD_JOB_QUEUE", "PGJOBD_JOB_ATTEMPT"};

bool names_job_variable(std::string_view entry) {
  const auto equals = entry.find('=');
  const std::string_view name = entry.substr(0, equals);
  for (const std::string_view variable : kJobVariables) {
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
    if (!names_job_variable(*entry)) environment.emplace_back(*entry);
  }
  environment.push_back("PGJOBD_JOB_ID=" + std::to_string(job.id));
  environment.push_back("PGJOBD_JOB_TYPE=" + job.type);
  environment.push_back("PGJOBD_JOB_QUEUE=" + job.queue);
  environment.push_back("PGJOBD_JOB_ATTEMPT=" + std::to_string(job.attempt));
  return environment;
}

}  // namespace pgjobd
