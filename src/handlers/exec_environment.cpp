// Builds the child environment: the daemon's environ (less its own secrets and control
// channels) plus PGJOBD_JOB_* for the job.

#include "handlers/exec_environment.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "log/secrets.hpp"

namespace pgjobd {
namespace {

// Replaced per job, or the daemon's own: its database credentials (PGJOBD_DATABASE_URL
// names only the daemon's database; DATABASE_URL is the application's by convention and
// is withheld only when it gave the daemon its credentials, see credentials_to_withhold)
// and systemd's control channel, which a child must not use to speak for the daemon.
constexpr std::array<std::string_view, 8> kWithheldVariables = {
    "PGJOBD_JOB_ID",       "PGJOBD_JOB_TYPE", "PGJOBD_JOB_QUEUE", "PGJOBD_JOB_ATTEMPT",
    "PGJOBD_DATABASE_URL", "NOTIFY_SOCKET",   "WATCHDOG_USEC",    "WATCHDOG_PID"};

// The value of `name` in `env`, or nullptr.
const char* find_variable(const char* const* env, std::string_view name) {
  for (const char* const* entry = env; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=') {
      return *entry + name.size() + 1;
    }
  }
  return nullptr;
}

bool withheld_entry(std::string_view entry, const WithheldCredentials& withheld) {
  const auto equals = entry.find('=');
  const std::string_view name = entry.substr(0, equals);
  if (std::find(kWithheldVariables.begin(), kWithheldVariables.end(), name) !=
      kWithheldVariables.end()) {
    return true;
  }
  if (std::find(withheld.names.begin(), withheld.names.end(), name) != withheld.names.end()) {
    return true;
  }
  const std::string_view value =
      equals == std::string_view::npos ? std::string_view() : entry.substr(equals + 1);
  return std::any_of(withheld.passwords.begin(), withheld.passwords.end(),
                     [value](const std::string& password) {
                       return value.find(password) != std::string_view::npos;
                     });
}

}  // namespace

WithheldCredentials credentials_to_withhold(const std::string& database_url,
                                            const char* const* env) {
  WithheldCredentials withheld;
  withheld.passwords = conninfo_passwords(database_url);
  // apply_environment: PGJOBD_DATABASE_URL, else DATABASE_URL, overrides the file. When
  // DATABASE_URL is what the daemon connects with, it is the daemon's credentials.
  const char* own = find_variable(env, "PGJOBD_DATABASE_URL");
  const char* shared = find_variable(env, "DATABASE_URL");
  if ((own == nullptr || *own == '\0') && shared != nullptr && *shared != '\0' &&
      database_url == shared) {
    withheld.names.emplace_back("DATABASE_URL");
  }
  // libpq reads PGPASSWORD only when the conninfo has no password.
  const char* pgpassword = find_variable(env, "PGPASSWORD");
  if (pgpassword != nullptr && *pgpassword != '\0' && withheld.passwords.empty()) {
    withheld.names.emplace_back("PGPASSWORD");
    if (std::strlen(pgpassword) >= kMinScrubbedSecretLength) {
      withheld.passwords.emplace_back(pgpassword);
    }
  }
  return withheld;
}

std::vector<std::string> build_child_environment(const Job& job,
                                                 const WithheldCredentials& withheld,
                                                 const char* const* env) {
  std::vector<std::string> environment;
  for (const char* const* entry = env; entry != nullptr && *entry != nullptr; ++entry) {
    if (!withheld_entry(*entry, withheld)) environment.emplace_back(*entry);
  }
  environment.push_back("PGJOBD_JOB_ID=" + std::to_string(job.id));
  environment.push_back("PGJOBD_JOB_TYPE=" + job.type);
  environment.push_back("PGJOBD_JOB_QUEUE=" + job.queue);
  environment.push_back("PGJOBD_JOB_ATTEMPT=" + std::to_string(job.attempt));
  return environment;
}

}  // namespace pgjobd
