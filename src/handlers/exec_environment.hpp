#pragma once
// The environment an exec handler's child runs with: the daemon's plus the job's identity,
// less the daemon's own credentials and control channels.

#include <string>
#include <vector>

#include "pgjobd/job.hpp"

namespace pgjobd {

// How the daemon's database credentials could show in an environment variable. Computed
// once, before any worker thread starts, and passed to the exec handlers.
struct WithheldCredentials {
  // Withheld whatever their value: DATABASE_URL when it gave the daemon its database.url,
  // PGPASSWORD when libpq uses it (the conninfo has no password of its own).
  std::vector<std::string> names;
  // A variable whose value contains one of these (the password, raw and percent-decoded,
  // at least kMinScrubbedSecretLength long) is withheld, whatever its name.
  std::vector<std::string> passwords;
};

// The credentials of a daemon connecting with `database_url` (its database.url once the
// environment overrides are applied) in the environment `env` ("NAME=value" entries, null
// terminated; normally environ).
WithheldCredentials credentials_to_withhold(const std::string& database_url,
                                            const char* const* env);

// `env` as "NAME=value" entries, with PGJOBD_JOB_ID, PGJOBD_JOB_TYPE, PGJOBD_JOB_QUEUE and
// PGJOBD_JOB_ATTEMPT set to the job's values (replacing any inherited entries of those
// names, so the child never sees two), and without: PGJOBD_DATABASE_URL, systemd's
// NOTIFY_SOCKET / WATCHDOG_USEC / WATCHDOG_PID, and what `withheld` names or matches.
std::vector<std::string> build_child_environment(const Job& job,
                                                 const WithheldCredentials& withheld,
                                                 const char* const* env);

}  // namespace pgjobd
