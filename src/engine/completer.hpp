#pragma once
// The only writer of final job states. Workers hand it completions; it writes them in
// batches (one transaction for many jobs), in order, and keeps them through a database
// outage until they can be written.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "db/job_store.hpp"
#include "engine/health.hpp"
#include "metrics/metrics.hpp"

namespace pgjobd {

class Completer {
 public:
  // delete_done: retention.done is 0, so done jobs are deleted instead of kept.
  Completer(const DatabaseConfig& db, std::string worker_id, bool delete_done, Metrics& metrics,
            Health& health);
  ~Completer();  // stops (see stop())
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  void submit(Completion completion);
  void set_delete_done(bool delete_done) { delete_done_ = delete_done; }  // live reload

  // Writes everything submitted so far, retrying through errors until `deadline`; then
  // stops the thread. What could not be written by then is logged (the rescuer returns
  // those jobs to the queue once their lease expires: delayed, not lost).
  void stop(std::chrono::steady_clock::time_point deadline);

  // Completions waiting to be written (tests, metrics).
  std::size_t backlog() const;
  // The jobs (id, attempt) of those completions, the batch being written included: their
  // leases must still be renewed, or a completer held up by the database could see them
  // rescued and run again before it writes that they finished.
  std::vector<std::pair<std::int64_t, int>> queued_jobs() const;

 private:
  void run();

  static constexpr std::size_t kMaxBatch = 1000;
  // A short wait lets completions that finish together share one transaction.
  static constexpr std::chrono::microseconds kFlushDelay{1000};

  JobStore store_;
  const std::string worker_id_;
  std::atomic<bool> delete_done_;
  Metrics& metrics_;
  Health& health_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Completion> queue_;
  std::chrono::steady_clock::time_point first_queued_at_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::thread thread_;  // last: joined before the members it uses go away
};

}  // namespace pgjobd
