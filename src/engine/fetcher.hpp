#pragma once
// The fetcher claims due jobs, never more than the pool can start at once, and hands them
// to the pool. It polls with adaptive backoff: an empty poll doubles the interval up to
// poll.max_interval, a poll that finds work resets it to poll.min_interval, and a full
// batch polls again as soon as slots are free. The claim signal (a NOTIFY, a freed slot)
// ends any wait at once.
//
// Jobs that are not due yet (a run_at in the future, a retry after its backoff) are woken
// for at their due time, not found by the next poll: a claim that came back short also
// says when the next job it could claim is due (ClaimStore::claim_with_due, in the same
// round trip and snapshot), and the fetcher ends its wait then. A limited claim does not
// say: after one the fetcher asks the store (next_due), only when what it knew may have
// changed (a NOTIFY or other wake-up, a full batch, the awaited time reached, a reload of
// the served queues), and claims again at once if a job came due while that claim was on
// its way (see learn_next_due). A retry the completer wrote arrives as
// ClaimSignal::due_at without a query. The wait is still never longer than the poll
// interval, so a job the fetcher did not hear of (a lost NOTIFY, a retry written by another
// daemon) is claimed within poll.max_interval as before.

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/claim_signal.hpp"
#include "engine/health.hpp"
#include "engine/worker_pool.hpp"
#include "limits/limit_registry.hpp"
#include "metrics/metrics.hpp"
#include "runtime/service.hpp"
#include "store/claim_store.hpp"

namespace pgjobd {

class Fetcher final : public Service {
 public:
  struct Options {
    std::string worker_id;
    Millis lease{30000};
    PollConfig poll;
    std::vector<std::string> types;                          // job types that have a handler
    std::int64_t max_payload_bytes = std::int64_t{4} << 20;  // worker.max_payload_bytes
    // The longest single wait while the pool is full: the loop marks progress after each,
    // so the watchdog sees a loop that waits for busy slots as alive. Tests shorten it.
    Millis progress_slice{1000};
    // The limits every daemon applies (README "Limits"); null: none (tests). While it says
    // active the fetcher claims with claim_limited(). The fetcher reads them on its own
    // session before its first claim (LimitRegistry::read_before_first_claim).
    LimitRegistry* limits = nullptr;
    // The INSERT trigger sends at most one NOTIFY per 2 ms per schema (sql/010): a job
    // whose INSERT went without one, relying on the last, commits at most about that long
    // after it, so often just after the claim that NOTIFY set off. A claim made for a
    // NOTIFY is therefore followed by one more this long after it began; the poll at
    // poll.min_interval still covers later commits. In a stream of 500 jobs/s this halved
    // the pick-ups over 10 ms (bench/README.md), for at most one claim per NOTIFY. Tests
    // lengthen it.
    std::chrono::microseconds trailing_claim{4000};
    // A claim that takes this long is warned about, at most once per kSlowClaimWarnEvery
    // (every claim's time is in pgjobd_claim_duration_seconds). Tests shorten it.
    Millis slow_claim{1000};
  };

  Fetcher(Options options, std::unique_ptr<ClaimStore> store, WorkerPool& pool, ClaimSignal& signal,
          Metrics& metrics, Health& health);
  ~Fetcher() override;  // stop()
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  void start() override;
  void request_stop() override;
  void join() override;  // once joined, no claim is in progress

  // When the claim loop last made progress (a wait ended or a claim returned). A loop
  // that waits for a full pool counts as progressing: only a claim that hangs does not.
  std::chrono::steady_clock::time_point last_progress() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(last_progress_.load(std::memory_order_relaxed)));
  }
  Millis max_interval() const;

  // Waits until the first claim was made (or failed, or the loop stopped before it), or
  // until `deadline`; true when it was. The engine starts its other sessions after it.
  bool wait_first_claim(std::chrono::steady_clock::time_point deadline) const;

  // Live reload: new poll intervals and the job types that now have a handler.
  void reconfigure(const PollConfig& poll, std::vector<std::string> types);
  void set_max_payload_bytes(std::int64_t bytes);

  // After a claim, the next one waits at most this long for claim_batch_floor() free slots,
  // unless the jobs held for a thread are still many (held_run_short).
  static constexpr std::chrono::microseconds kClaimCooldown{2000};
  // The held jobs run short below this share of what the pool may hold (1/4). The prefetch
  // budget is about 50 ms of the workers' pace, so a quarter of it is about 12 ms of work,
  // several times a claim's round trip. (Held and free slots add up to about the holding
  // less the threads, so with a holding over four times the threads the floor comes
  // first.) Claiming earlier makes more, smaller claims, each a transaction
  // (bench/README.md, issue 44, measures it).
  static constexpr int kHeldShortShare = 4;
  // How much further back than the claim's start the question after it looks for jobs
  // come due (see learn_next_due): a second covers any question slower to arrive than its
  // claim, and bounds what it reads of a queue's due jobs of types this daemon lacks.
  static constexpr std::chrono::seconds kDueLookBack{1};
  // Anyone who may connect can NOTIFY the trigger's channel (no right needed) with the
  // trigger's payload, and a flood of them made a claim each. So NOTIFYs whose claims find
  // nothing are spaced out: after each such claim the next claim for a NOTIFY waits
  // twice as long since the last began (from kNotifyGapMin up to this), and a claim that
  // finds a job ends the spacing. A flood costs at most two claims (the NOTIFY's and its
  // trailing one) per kNotifyGapMax; a daemon that lost the race for a job to another
  // waits at most that long more for the next NOTIFY's (the winner claims at once).
  static constexpr std::chrono::milliseconds kNotifyGapMin{1};
  static constexpr std::chrono::milliseconds kNotifyGapMax{20};
  // A slow claim (Options::slow_claim) is warned about at most once per this.
  static constexpr std::chrono::seconds kSlowClaimWarnEvery{60};

 private:
  void run(const std::stop_token& stop);
  bool wait_until_claim(const std::stop_token& stop);  // false: stop requested
  // true when the batch was full (more work is likely waiting). woken: the claim was made
  // for a wake-up (a NOTIFY: jobs were inserted), so what next_due said may be stale.
  bool claim_once(bool woken);
  // After a short claim: takes what the claim said of the next due job (a claim without
  // limits answers it in its own round trip), or asks the store, unless nothing changed.
  void learn_next_due(const ClaimRequest& request);
  // What the store said at `answered`, of `queues` (see learn_next_due).
  void note_next_due(const DueTimes& due, std::chrono::steady_clock::time_point answered,
                     std::vector<std::string> queues);
  // The claim itself: the plain one, or the limited one while limits exist (whose holds
  // are counted and, for rate limits, awaited).
  std::vector<Job> claim_jobs(const ClaimRequest& request);
  // Counts the claim's time in the metrics and warns when it was slow.
  void note_claim_time(std::chrono::steady_clock::duration took, std::size_t jobs);
  int claim_batch_floor() const;  // free slots worth a claim without waiting: half the pool
  // Whether the jobs held for a thread (worker.prefetch) are few enough that a claim at the
  // cooldown is worth making before claim_batch_floor() slots are free.
  bool held_run_short() const;
  // Whether claims may take jobs beyond the free threads (worker.prefetch): not while
  // limits apply, since a held job is a running row and would count against them.
  bool prefetch() const;
  // Bounds the jobs the pool holds by a limit that covers everything it serves
  // (LimitRegistry::covering_concurrency), or lifts the bound.
  void cap_holding();
  void mark_progress();

  const std::string worker_id_;
  const Millis lease_;
  const Millis progress_slice_;
  const std::chrono::microseconds trailing_claim_delay_;
  const Millis slow_claim_;
  const std::unique_ptr<ClaimStore> store_;
  WorkerPool& pool_;
  ClaimSignal& signal_;
  Metrics& metrics_;
  Health& health_;
  LimitRegistry* const limits_;

  mutable std::mutex settings_mutex_;  // guards the reloadable settings below
  Millis min_interval_;
  Millis max_interval_;
  std::vector<std::string> types_;
  std::int64_t max_payload_bytes_;
  Millis interval_;  // the current poll interval, between min and max

  // The claim thread's own state.
  bool backlog_ = false;  // the last claim was full
  // Queues whose last claim took every slot offered to them (see claim_once).
  std::set<std::string> saturated_;
  std::chrono::steady_clock::time_point next_poll_{};
  std::chrono::steady_clock::time_point cooled_down_at_{};  // see kClaimCooldown
  // The next job not due yet, as the store last said (max: none), and due_at() hints.
  std::chrono::steady_clock::time_point next_due_ = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point hinted_due_ = std::chrono::steady_clock::time_point::max();
  bool next_due_stale_ = true;                // next_due_ may be wrong: ask after the next claim
  std::vector<std::string> next_due_queues_;  // the queues next_due_ was asked for (reloads)
  bool woken_ = false;                        // the claim about to be made is for a wake-up
  bool for_insert_ = false;                   // ... for the INSERT trigger's NOTIFY
  std::vector<std::int64_t> unblocked_;       // ... and ClaimSignal::unblocked, taken with it
  // The spacing of NOTIFYs that find nothing (kNotifyGapMax): the current gap (zero: none),
  // and when a NOTIFY may set off the next claim.
  std::chrono::steady_clock::duration notify_gap_{};
  std::chrono::steady_clock::time_point notify_ready_at_{};
  // When the claim that follows a NOTIFY's is due (max: none; see Options::trailing_claim).
  std::chrono::steady_clock::time_point trailing_claim_ =
      std::chrono::steady_clock::time_point::max();
  // When the last claim began: next_due looks past jobs due before then (see learn_next_due).
  std::chrono::steady_clock::time_point claim_began_{};
  // The last claim's own answer of when the next job is due, of the queues it was asked
  // for, and when it came (ClaimStore::claim_with_due; nothing after a full or limited claim).
  std::optional<DueTimes> claim_due_;
  std::vector<std::string> claim_due_queues_;
  std::chrono::steady_clock::time_point claim_answered_{};
  // A concurrency limit held back a job in the last claim: the next batch of completions
  // this daemon writes makes a claim due (a job it ran may have counted against it),
  // as a freed slot does for a saturated queue. written_at_claim_: ClaimSignal::written
  // when the last claim was made.
  bool limit_held_ = false;
  std::uint64_t written_at_claim_ = 0;
  bool limits_read_ = false;     // the claim session read the limits itself (see claim_once)
  bool claimed_before_ = false;  // a claim was sent on this loop (see claim_jobs)
  // Slow claims since the last warning, and when that was (see Options::slow_claim).
  int slow_claims_ = 0;
  std::chrono::steady_clock::time_point slow_warned_at_{};
  std::atomic<std::chrono::steady_clock::rep> last_progress_{
      std::chrono::steady_clock::now().time_since_epoch().count()};
  // Set once by the loop (see wait_first_claim); the future is read by other threads.
  std::promise<void> first_claim_;
  const std::shared_future<void> first_claim_made_ = first_claim_.get_future().share();
  ServiceThread thread_;  // last: joined before the members it uses go away
};

}  // namespace pgjobd
