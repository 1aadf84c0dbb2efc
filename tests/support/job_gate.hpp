#pragma once
// Handlers under a test's control: each job runs until the test releases it or its stop
// token fires, and every start, stop and finish is recorded and can be waited for, so a
// test never guesses with a sleep whether a job has got somewhere.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <vector>

#include "engine/job_stop.hpp"
#include "pgjobd/job.hpp"
#include "store/job_store.hpp"
#include "support/engine_printers.hpp"

namespace pgjobd::testing {

class JobGate {
 public:
  // The handler: blocks until release(job.id) or release_all(), then returns done; if its
  // stop token fires first, returns released (as the exec and http handlers do).
  JobResult run(const Job& job, std::stop_token stop);
  // A WorkerPool executor around run(), producing the completion the runner would
  // (cancelled when stopped for a cancel).
  std::optional<Completion> execute(const Job& job, const JobStop& stop);

  void release(std::int64_t id);
  void release_all();  // this and every later job: for TearDown, so joins never hang

  std::vector<std::int64_t> started() const;  // in start order
  std::set<std::int64_t> stopped() const;     // those that ended by their stop token
  // Whether a stop was requested for the job's latest run, read from its token at once
  // (the handler may not have woken up yet).
  bool stop_requested(std::int64_t id) const;
  // When the stop was requested, taken in the requesting thread (a stop callback), so a
  // test can check that something was not stopped too early.
  std::optional<std::chrono::steady_clock::time_point> stop_requested_at(std::int64_t id) const;
  int running() const;  // started and not yet returned
  int finished() const;
  int max_running() const;  // the most handlers ever running at once

  bool wait_started(int n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  bool wait_finished(int n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  bool wait_stopped(std::int64_t id,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;

 private:
  bool wait(const std::function<bool()>& condition, std::chrono::milliseconds timeout) const;

  mutable std::mutex mutex_;  // guards everything below
  mutable std::condition_variable_any cv_;
  std::set<std::int64_t> released_;
  bool all_released_ = false;
  std::vector<std::int64_t> started_;
  std::map<std::int64_t, std::stop_token> tokens_;
  std::map<std::int64_t, std::chrono::steady_clock::time_point> stop_times_;
  std::set<std::int64_t> stopped_;
  int finished_ = 0;
  int max_running_ = 0;
};

}  // namespace pgjobd::testing
