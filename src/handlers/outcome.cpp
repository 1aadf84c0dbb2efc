// Names of job outcomes, as used in logs, metrics labels and the jobs table.

#include "pgjobd/job.hpp"

namespace pgjobd {

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kDone:
      return "done";
    case Outcome::kRetry:
      return "retry";
    case Outcome::kDead:
      return "dead";
    case Outcome::kReleased:
      return "released";
    case Outcome::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace pgjobd
