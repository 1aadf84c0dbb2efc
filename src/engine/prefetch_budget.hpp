#pragma once
// How many claimed jobs a daemon may hold beyond its workers (worker.prefetch). Claiming
// more jobs per statement spreads the claim's fixed cost (planning, the round trip, the
// commit) over more jobs: on a backlog of short jobs that is most of what a claim costs.
//
// A held job waits for a worker while other daemons might have run it, so there is a
// budget only for short jobs (kShortJob on average, as the workers measured them), and it
// follows what the workers get through: at most the jobs they finished in the last
// kHorizon, so a held job waits about kHorizon at most. Longer jobs get none and stay in
// the table for whoever is free: counting finishes alone would let jobs that started
// together, and so finish together, look fast. Large payloads cut the budget too, so that
// held payloads stay near kHeldPayloadBytes.
// Not thread-safe: the worker pool calls it under its lock.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace pgjobd {

class PrefetchBudget {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kHorizon{50};
  static constexpr std::chrono::milliseconds kShortJob{10};
  static constexpr std::size_t kHeldPayloadBytes = 32 * 1024 * 1024;

  using Now = std::function<Clock::time_point()>;

  explicit PrefetchBudget(int max = 0, Now now = &Clock::now) : max_(max), now_(std::move(now)) {}

  void set_max(int max) { max_ = max; }
  // The budget's clock: a job's start and finish are read from it.
  Clock::time_point now() const { return now_(); }
  // A job that started at `started` left its worker at `ended` (both read from now(); the
  // pool reads them before taking its lock).
  void finished(Clock::time_point started, Clock::time_point ended);
  // A claim brought jobs whose largest payload has this many bytes (0 for an empty claim
  // is not reported): the next claims assume payloads of about that size.
  void claimed(std::size_t largest_payload_bytes) { largest_payload_ = largest_payload_bytes; }
  // How many jobs may be held beyond the workers now: 0..max.
  int budget() const;

 private:
  int max_;
  Now now_;  // the steady clock; a test's own clock in unit tests
  // Finishes counted in buckets of kHorizon: the current one and the one before, which
  // together give a sliding estimate of the finishes in the last kHorizon.
  std::int64_t bucket_ = 0;  // index of the current bucket (time / kHorizon)
  std::int64_t current_ = 0;
  std::int64_t previous_ = 0;
  std::size_t largest_payload_ = 0;
  double mean_run_us_ = -1;  // the jobs' mean run time (moving average); -1: none yet
};

}  // namespace pgjobd
