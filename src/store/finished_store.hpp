#pragma once
// The finished-job notifier's store: announces jobs that ended on pgjobd_finished.

#include <string>
#include <vector>

#include "store/db_error.hpp"

namespace pgjobd {

class FinishedStore {
 public:
  virtual ~FinishedStore() = default;

  // Sends each payload on the pgjobd_finished channel, all in one transaction of its own
  // that commits without waiting for its WAL flush (a lost announcement is a waiter's
  // timeout, not a lost job). Throws DbError.
  virtual void announce_finished(const std::vector<std::string>& payloads) = 0;
};

}  // namespace pgjobd
