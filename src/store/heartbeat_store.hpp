#pragma once
// The lease renewer's store: heartbeats.

#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "store/db_error.hpp"
#include "store/job_attempt.hpp"

namespace pgjobd {

struct HeartbeatReport {
  std::vector<JobAttempt> kept;  // still ours: leases extended
  // Still ours, but another session holds the row locked: not renewed this time (the
  // heartbeat does not wait for it).
  std::vector<JobAttempt> held;
  // Of those kept or held, the ones pgjobd_cancel asked to stop.
  std::vector<JobAttempt> cancel_requested;
};

class HeartbeatStore {
 public:
  virtual ~HeartbeatStore() = default;

  // Extends the lease of these attempts; returns those still ours (renewed, or held by
  // another session's row lock and left as they are), and which of them have a cancel
  // request. Never waits for another session's lock.
  virtual HeartbeatReport heartbeat(const std::vector<JobAttempt>& jobs,
                                    const std::string& worker_id, Millis lease) = 0;
};

}  // namespace pgjobd
