#pragma once
// How GoogleTest prints the engine's small value types in failure messages ("job 3
// attempt 1", not a 16-byte dump). Found by argument-dependent lookup in namespace pgjobd.

#include <ostream>

#include "pgjobd/job.hpp"
#include "store/job_attempt.hpp"

namespace pgjobd {

inline void PrintTo(const JobAttempt& job, std::ostream* out) {
  *out << "job " << job.id << " attempt " << job.attempt;
}

inline void PrintTo(Outcome outcome, std::ostream* out) { *out << to_string(outcome); }

}  // namespace pgjobd
