#pragma once
// The fetcher claims due jobs, never more than the pool can start at once, and hands them
// to the pool. It polls with adaptive backoff: an empty poll doubles the interval up to
// poll.max_interval, a poll that finds work resets it to poll.min_interval, and a full
// batch polls again as soon as slots are free. wake() (a NOTIFY) ends any wait at once.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "db/job_store.hpp"
#include "engine/health.hpp"
#include "engine/worker_pool.hpp"
#include "metrics/metrics.hpp"

namespace pgjobd {

class Fetcher {
 public:
  Fetcher(const Config& config, std::vector<std::string> types, std::string worker_id,
          WorkerPool& pool, Metrics& metrics, Health& health);
  ~Fetcher();  // stops
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  void wake();        // new jobs may be due (NOTIFY, enqueue)
  void slot_freed();  // a worker finished (called from worker threads)
  void stop();        // stops claiming; returns once no claim is in progress. Safe twice.
  // When the claim loop last made progress (a wait ended or a claim returned): a stuck
  // loop means a wedged daemon (the systemd watchdog stops pinging).
  std::chrono::steady_clock::time_point last_progress() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(last_progress_.load(std::memory_order_relaxed)));
  }
  Millis max_interval() const;

  // Live reload: new poll intervals and the job types that now have a handler.
  void reconfigure(const PollConfig& poll, std::vector<std::string> types);

  // After a claim, the next one waits at most this long for claim_batch_floor() free slots.
  static constexpr std::chrono::microseconds kClaimCooldown{2000};

 private:
  void run();
  bool claim_once();              // true when the batch was full (more work is likely waiting)
  int claim_batch_floor() const;  // free slots worth a claim without waiting: half the pool

  const Millis lease_;
  const std::string worker_id_;
  WorkerPool& pool_;
  Metrics& metrics_;
  Health& health_;
  JobStore store_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  // Guarded by mutex_ (reloadable).
  Millis min_interval_;
  Millis max_interval_;
  std::vector<std::string> types_;
  bool stopping_ = false;
  bool wake_requested_ = true;  // poll once at start
  bool backlog_ = false;        // the last claim was full
  std::chrono::steady_clock::time_point next_poll_{};
  std::chrono::steady_clock::time_point cooled_down_at_{};  // see kClaimCooldown
  Millis interval_;
  std::atomic<std::chrono::steady_clock::rep> last_progress_{
      std::chrono::steady_clock::now().time_since_epoch().count()};
  std::thread thread_;  // last: joined before the members it uses go away
};

}  // namespace pgjobd
