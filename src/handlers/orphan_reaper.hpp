#pragma once
// Ends the processes a job started and detached (setsid, a double fork, a new process group):
// a process-group kill cannot reach them, so the daemon becomes their child subreaper, and
// when their parent exits they become the daemon's children, to be killed with their job.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace pgjobd {

class OrphanReaper {
 public:
  // The one per process: the subreaper setting is process-wide.
  static OrphanReaper& instance();

  // Makes this process the child subreaper of its descendants (prctl
  // PR_SET_CHILD_SUBREAPER); false, with errno, if the kernel refuses. Until it succeeds,
  // job_ended() sweeps nothing.
  bool become_subreaper();

  // Brackets one job's run: between the two, a detached process carrying the job's id in
  // its environment (PGJOBD_JOB_ID, which every exec child gets) is left alone; job_ended()
  // kills and reaps every adopted process whose job is not running, its descendants
  // included.
  void job_started(std::int64_t job_id);
  void job_ended(std::int64_t job_id);

 private:
  OrphanReaper() = default;
  void sweep();  // with mutex_ held

  std::mutex mutex_;  // guards running_; held through a sweep, so no two race for one pid
  std::map<std::string, int> running_;  // PGJOBD_JOB_ID value → exec jobs running with it
  std::atomic<bool> subreaper_{false};
};

// Calls job_started() now and job_ended() when it goes.
class OrphanScope {
 public:
  explicit OrphanScope(std::int64_t job_id) : job_id_(job_id) {
    OrphanReaper::instance().job_started(job_id_);
  }
  ~OrphanScope() { OrphanReaper::instance().job_ended(job_id_); }
  OrphanScope(const OrphanScope&) = delete;
  OrphanScope& operator=(const OrphanScope&) = delete;

 private:
  std::int64_t job_id_;
};

}  // namespace pgjobd
