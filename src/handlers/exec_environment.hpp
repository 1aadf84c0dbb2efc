#pragma once
// The environment an exec handler's child runs with: the daemon's plus the job's identity.

#include <string>
#include <vector>

#include "pgjobd/job.hpp"

namespace pgjobd {

// The daemon's environment as "NAME=value" entries, with PGJOBD_JOB_ID, PGJOBD_JOB_TYPE,
// PGJOBD_JOB_QUEUE and PGJOBD_JOB_ATTEMPT set to the job's values (replacing any
// inherited entries of those names, so the child never sees two).
std::vector<std::string> build_child_environment(const Job& job);

}  // namespace pgjobd
