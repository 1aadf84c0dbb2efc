// WorkerPool: slot accounting (global and per queue), live resize, stopping jobs, and the
// order in which a finished job hands over its completion and frees its slot.

#include "engine/worker_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/claims.hpp"
#include "support/job_gate.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::JobGate;
using pgjobd::testing::wait_until;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using testing::as_map;
using testing::Slots;

// Without prefetch unless asked: the slot counts of most tests do not move as jobs finish.
WorkerConfig workers(int concurrency, const Slots& queue_limits = {{"default", 0}},
                     int prefetch = 0) {
  WorkerConfig config;
  config.concurrency = concurrency;
  config.prefetch = prefetch;
  config.queues.clear();
  for (const auto& [name, limit] : queue_limits) config.queues[name].concurrency = limit;
  return config;
}

Job job_in(std::int64_t id, const std::string& queue = "default", int priority = 0) {
  Job job;
  job.id = id;
  job.queue = queue;
  job.priority = priority;
  job.type = "gated";
  return job;
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  void TearDown() override {
    gate_.release_all();  // before the pool (declared last) joins its workers
    open_handover();
  }

  WorkerPool& make_pool(const WorkerConfig& config) {
    pool_ = std::make_unique<WorkerPool>(
        config, [this](const Job& job, const JobStop& stop) { return gate_.execute(job, stop); },
        [this](Completion completion) { handed_over(std::move(completion)); },
        [this](int working_now, bool for_fetcher) {
          std::lock_guard lock(mutex_);
          events_.push_back("freed busy=" + std::to_string(working_now) +
                            (for_fetcher ? " fetcher" : ""));
          ++freed_;
          cv_.notify_all();
        },
        [this] { return now_.load(); });
    return *pool_;
  }

  void handed_over(Completion completion) {
    std::unique_lock lock(mutex_);
    events_.push_back("complete " + std::to_string(completion.job.id));
    completions_.push_back(completion);
    in_handover_ = completion.job.id;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !hold_handover_; });
    in_handover_ = 0;
  }
  void open_handover() {
    std::lock_guard lock(mutex_);
    hold_handover_ = false;
    cv_.notify_all();
  }
  bool wait_freed(int n) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, seconds(20), [&] { return freed_ >= n; });
  }
  int freed() {
    std::lock_guard lock(mutex_);
    return freed_;
  }

  JobGate gate_;
  std::mutex mutex_;  // guards the members below
  std::condition_variable cv_;
  std::vector<std::string> events_;
  std::vector<Completion> completions_;
  int freed_ = 0;
  bool hold_handover_ = false;  // the complete callback blocks while set
  std::int64_t in_handover_ = 0;
  // The prefetch budget's clock: a test moves it by hand.
  std::atomic<Clock::time_point> now_{Clock::time_point{} + seconds(1000)};
  std::unique_ptr<WorkerPool> pool_;  // last: its workers are joined first
};

TEST_F(WorkerPoolTest, SlotsAreCountedGloballyAndPerQueue) {
  WorkerPool& pool = make_pool(workers(4, {{"a", 2}, {"b", 0}}));
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"a", 2}, {"b", 4}}));
  EXPECT_EQ(pool.claimable(), 4);
  pool.start();

  pool.submit({job_in(1, "a"), job_in(2, "a")});
  // Queue a is at its limit and disappears; b keeps what the global bound leaves.
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"b", 2}}));
  EXPECT_EQ(pool.claimable(), 2);
  EXPECT_EQ(pool.busy(), 2);

  pool.submit({job_in(3, "b")});
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"b", 1}}));
  EXPECT_EQ(pool.claimable(), 1);
  ASSERT_TRUE(gate_.wait_started(3));

  gate_.release(1);
  ASSERT_TRUE(wait_freed(1));
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"a", 1}, {"b", 2}}));
  EXPECT_EQ(pool.claimable(), 2);
  EXPECT_EQ(pool.busy(), 2);
  EXPECT_EQ(pool.submitted(), 3u);
}

TEST_F(WorkerPoolTest, ClaimableIsBoundedByTheSumOfQueueLimits) {
  WorkerPool& pool = make_pool(workers(8, {{"a", 1}, {"b", 2}}));
  EXPECT_EQ(pool.claimable(), 3);
  pool.start();
  pool.submit({job_in(1, "b")});
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(pool.claimable(), 2);
}

TEST_F(WorkerPoolTest, ResizeUpStartsThreadsWithoutDisturbingRunningJobs) {
  WorkerPool& pool = make_pool(workers(1));
  pool.start();
  pool.submit({job_in(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_EQ(pool.claimable(), 0);

  pool.resize(workers(3));
  EXPECT_EQ(pool.capacity(), 3);
  EXPECT_EQ(pool.claimable(), 2);
  pool.submit({job_in(2), job_in(3)});
  // All three block in their handlers at once: the new slots got threads of their own.
  ASSERT_TRUE(gate_.wait_started(3));
  EXPECT_EQ(gate_.running(), 3);
  EXPECT_FALSE(gate_.stop_requested(1));

  gate_.release_all();
  ASSERT_TRUE(wait_freed(3));
  EXPECT_TRUE(gate_.stopped().empty());
  std::lock_guard lock(mutex_);
  ASSERT_EQ(completions_.size(), 3u);
  for (const auto& completion : completions_) EXPECT_EQ(completion.outcome, Outcome::kDone);
}

TEST_F(WorkerPoolTest, ResizeDownLetsRunningJobsFinishAndClaimsNothingUntilBelowTheLimit) {
  WorkerPool& pool = make_pool(workers(3));
  pool.start();
  pool.submit({job_in(1), job_in(2), job_in(3)});
  ASSERT_TRUE(gate_.wait_started(3));

  pool.resize(workers(1));
  EXPECT_TRUE(pool.free_slots().empty());
  // Over capacity the pool has no slot to offer (the count itself goes negative, which
  // the fetcher treats as none).
  EXPECT_LE(pool.claimable(), 0);
  for (std::int64_t id : {1, 2, 3}) EXPECT_FALSE(gate_.stop_requested(id)) << id;

  gate_.release(1);
  ASSERT_TRUE(wait_freed(1));
  EXPECT_TRUE(pool.free_slots().empty());  // 2 busy, capacity 1
  gate_.release(2);
  ASSERT_TRUE(wait_freed(2));
  EXPECT_TRUE(pool.free_slots().empty());  // 1 busy, capacity 1
  gate_.release(3);
  ASSERT_TRUE(wait_freed(3));
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"default", 1}}));
  EXPECT_EQ(pool.claimable(), 1);
  EXPECT_TRUE(gate_.stopped().empty());

  // A thread is left for new work.
  pool.submit({job_in(4)});
  ASSERT_TRUE(gate_.wait_started(4));
  gate_.release(4);
  ASSERT_TRUE(wait_freed(4));
}

// Jobs held beyond the threads (worker.prefetch) do not keep surplus threads alive after a
// shrink: the smaller bound holds for them too.
TEST_F(WorkerPoolTest, ResizeDownHoldsForHeldJobsToo) {
  WorkerPool& pool = make_pool(workers(3));
  pool.start();
  pool.submit({job_in(1), job_in(2), job_in(3)});
  ASSERT_TRUE(gate_.wait_started(3));
  pool.submit({job_in(4), job_in(5), job_in(6)});  // held
  pool.resize(workers(1));
  gate_.release(1);
  gate_.release(2);
  gate_.release(3);
  ASSERT_TRUE(wait_freed(3));
  ASSERT_TRUE(gate_.wait_started(4));
  // The two surplus threads left: the next held job waits for the one thread.
  EXPECT_FALSE(gate_.wait_started(5, std::chrono::milliseconds(200)));
  EXPECT_EQ(pool.working(), 1);
  gate_.release_all();
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
  EXPECT_EQ(gate_.max_running(), 3);  // the three from before the resize
  EXPECT_EQ(gate_.started().size(), 6u);
}

TEST_F(WorkerPoolTest, ResizeChangesQueueLimitsLive) {
  WorkerPool& pool = make_pool(workers(4, {{"a", 1}}));
  pool.start();
  pool.submit({job_in(1, "a")});
  EXPECT_TRUE(pool.free_slots().empty());
  pool.resize(workers(4, {{"a", 2}, {"b", 0}}));
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"a", 1}, {"b", 3}}));
  // A queue no longer served offers no slots; its running job still counts globally.
  pool.resize(workers(4, {{"b", 0}}));
  EXPECT_EQ(as_map(pool.free_slots()), (Slots{{"b", 3}}));
  EXPECT_FALSE(gate_.stop_requested(1));
}

TEST_F(WorkerPoolTest, StopJobsStopsOnlyTheNamedAttempts) {
  WorkerPool& pool = make_pool(workers(3));
  pool.start();
  pool.submit({job_in(1), job_in(2), job_in(3)});
  ASSERT_TRUE(gate_.wait_started(3));

  pool.stop_jobs({{1, 2}});  // job 1, but another attempt than the one running
  pool.stop_jobs({{2, 1}});
  EXPECT_FALSE(gate_.stop_requested(1));
  EXPECT_TRUE(gate_.stop_requested(2));
  EXPECT_FALSE(gate_.stop_requested(3));
  ASSERT_TRUE(gate_.wait_stopped(2));
  ASSERT_TRUE(wait_freed(1));

  pool.stop_all_jobs();
  ASSERT_TRUE(wait_freed(3));
  EXPECT_EQ(gate_.stopped(), (std::set<std::int64_t>{1, 2, 3}));
  std::lock_guard lock(mutex_);
  for (const auto& completion : completions_) EXPECT_EQ(completion.outcome, Outcome::kReleased);
}

// cancel_jobs stops the named attempts for a cancel: once each (a later call reports
// nothing new), and their executors see the cause, so they complete as cancelled.
TEST_F(WorkerPoolTest, CancelJobsStopsTheNamedAttemptsOnceWithTheirCause) {
  WorkerPool& pool = make_pool(workers(3));
  pool.start();
  pool.submit({job_in(1), job_in(2)});
  ASSERT_TRUE(gate_.wait_started(2));

  EXPECT_TRUE(pool.cancel_jobs({{1, 2}}).empty());  // another attempt than the one running
  EXPECT_EQ(pool.cancel_jobs({{1, 1}, {9, 1}}), (std::vector<JobAttempt>{{1, 1}}));
  EXPECT_TRUE(pool.cancel_jobs({{1, 1}}).empty());  // already asked
  ASSERT_TRUE(gate_.wait_stopped(1));
  ASSERT_TRUE(wait_freed(1));
  EXPECT_FALSE(gate_.stop_requested(2));
  gate_.release(2);
  ASSERT_TRUE(wait_freed(2));
  std::lock_guard lock(mutex_);
  ASSERT_EQ(completions_.size(), 2u);
  EXPECT_EQ(completions_[0].job, (JobAttempt{1, 1}));
  EXPECT_EQ(completions_[0].outcome, Outcome::kCancelled);
  EXPECT_EQ(completions_[1].outcome, Outcome::kDone);
}

TEST_F(WorkerPoolTest, StopExpiredStopsJobsOnceTheirLeaseRanOut) {
  WorkerPool& pool = make_pool(workers(2));
  pool.start();
  pool.submit({job_in(1), job_in(2)});
  ASSERT_TRUE(gate_.wait_started(2));

  // A long lease: the jobs were submitted just now.
  EXPECT_TRUE(pool.stop_expired(Millis(3600000)).empty());
  // No lease left, but job 1 renewed later than now (its heartbeats keep up): only job 2
  // has run out.
  pool.renewed({{1, 1}}, Clock::now() + std::chrono::hours(1));
  EXPECT_EQ(pool.stop_expired(Millis(0)), (std::vector<JobAttempt>{{2, 1}}));
  EXPECT_FALSE(gate_.stop_requested(1));
  EXPECT_TRUE(gate_.stop_requested(2));
  // A renewal of another attempt of job 1 is not its own.
  pool.renewed({{1, 2}}, Clock::now() + std::chrono::hours(2));
  EXPECT_TRUE(pool.stop_expired(Millis(0)).empty());
  EXPECT_EQ(pool.stop_expired(-std::chrono::hours(1) - Millis(1)),
            (std::vector<JobAttempt>{{1, 1}}));
  // Each expiry is reported once, even while the handler is still returning.
  EXPECT_TRUE(pool.stop_expired(-std::chrono::hours(3)).empty());
  ASSERT_TRUE(wait_freed(2));
  EXPECT_EQ(gate_.stopped(), (std::set<std::int64_t>{1, 2}));
}

TEST_F(WorkerPoolTest, ReturnedHandlerIsRunningButNotStillRunning) {
  WorkerPool& pool = make_pool(workers(2));
  {
    std::lock_guard lock(mutex_);
    hold_handover_ = true;
  }
  pool.start();
  pool.submit({job_in(1), job_in(2)});
  ASSERT_TRUE(gate_.wait_started(2));
  gate_.release(1);
  {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(cv_.wait_for(lock, seconds(20), [&] { return in_handover_ == 1; }));
  }
  // Job 1 is still in the pool (its completion is being handed over) and must be
  // heartbeated, but it no longer runs, so a lost lease must not count against it.
  auto running = pool.running();
  std::sort(running.begin(), running.end());
  EXPECT_EQ(running, (std::vector<JobAttempt>{{1, 1}, {2, 1}}));
  EXPECT_EQ(pool.still_running({{1, 1}, {2, 1}}), (std::vector<JobAttempt>{{2, 1}}));
  EXPECT_EQ(pool.busy(), 2);  // the slot is freed only after the hand-over

  open_handover();
  // The job leaves running() last of all, just after its slot is freed.
  EXPECT_TRUE(wait_until(
      [&] {
        return pool.running() == std::vector<JobAttempt>{{2, 1}};
      },
      seconds(20)));
}

TEST_F(WorkerPoolTest, CompletionIsHandedOverBeforeTheSlotIsFreed) {
  WorkerPool& pool = make_pool(workers(1));
  pool.start();
  pool.submit({job_in(7)});
  ASSERT_TRUE(gate_.wait_started(1));
  gate_.release(7);
  ASSERT_TRUE(wait_freed(1));
  std::lock_guard lock(mutex_);
  EXPECT_EQ(events_, (std::vector<std::string>{"complete 7", "freed busy=0 fetcher"}));
}

TEST_F(WorkerPoolTest, WaitIdleEndsAtTheDeadlineOnInterruptOrWhenIdle) {
  WorkerPool& pool = make_pool(workers(1));
  pool.start();
  EXPECT_TRUE(pool.wait_idle(Clock::now()));  // nothing running
  pool.submit({job_in(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_FALSE(pool.wait_idle(Clock::now() + std::chrono::milliseconds(20)));

  pool.interrupt_wait();  // from now on an interruptible wait returns at once
  const auto before = Clock::now();
  EXPECT_FALSE(pool.wait_idle(Clock::now() + seconds(30)));
  EXPECT_LT(Clock::now() - before, seconds(10));

  gate_.release(1);
  EXPECT_TRUE(pool.wait_idle(Clock::now() + seconds(20), /*interruptible=*/false));
}

TEST_F(WorkerPoolTest, StopLetsTheJobsInHandFinish) {
  WorkerPool& pool = make_pool(workers(2));
  pool.start();
  pool.submit({job_in(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  pool.request_stop();
  EXPECT_FALSE(gate_.stop_requested(1));  // a pool stop is not a job stop
  gate_.release(1);
  pool.join();
  EXPECT_EQ(freed(), 1);
  std::lock_guard lock(mutex_);
  ASSERT_EQ(completions_.size(), 1u);
  EXPECT_EQ(completions_[0].outcome, Outcome::kDone);
}

// worker.prefetch: beyond its threads the pool may hold as many jobs as it finished in the
// last 50 ms (PrefetchBudget), never while the fetcher asks without prefetch (limits).
TEST_F(WorkerPoolTest, PrefetchRoomFollowsTheJobsJustFinished) {
  WorkerPool& pool = make_pool(workers(2, {{"default", 0}}, 10));
  pool.start();
  EXPECT_EQ(pool.claimable(), 2);  // nothing finished yet: the threads only
  pool.submit({job_in(1), job_in(2)});
  ASSERT_TRUE(gate_.wait_started(2));
  gate_.release(1);
  gate_.release(2);
  ASSERT_TRUE(wait_freed(2));
  EXPECT_EQ(pool.claimable(), 4);
  EXPECT_EQ(pool.holdable(), 4);
  EXPECT_EQ(pool.claimable(/*prefetch=*/false), 2);
  EXPECT_EQ(pool.holdable(/*prefetch=*/false), 2);
  now_ = now_.load() + seconds(1);  // the pace is forgotten
  EXPECT_EQ(pool.claimable(), 2);
}

TEST_F(WorkerPoolTest, HeldJobsWaitForAThreadHighestPriorityFirst) {
  WorkerPool& pool = make_pool(workers(1));
  pool.start();
  pool.submit({job_in(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  pool.submit({job_in(2), job_in(3)});
  pool.submit({job_in(4, "default", 5)});  // a later claim's urgent job
  EXPECT_EQ(pool.busy(), 4);               // in hand
  EXPECT_EQ(pool.working(), 1);            // on a thread
  EXPECT_EQ(pool.held(), 3);               // waiting for one
  EXPECT_EQ(pool.running().size(), 4u);    // each held job's lease is renewed too
  EXPECT_EQ(pool.claimable(), 0);
  gate_.release_all();
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
  EXPECT_EQ(gate_.started(), (std::vector<std::int64_t>{1, 4, 2, 3}));
}

// The engine starts the pool's threads after its fetcher (creating them takes tens of
// milliseconds): jobs submitted before then are held, with their slots and leases
// counted, and run once the threads start.
TEST_F(WorkerPoolTest, JobsSubmittedBeforeStartAreHeldUntilItsThreadsRun) {
  WorkerPool& pool = make_pool(workers(2));
  pool.submit({job_in(1), job_in(2, "default", 5)});
  EXPECT_EQ(pool.busy(), 2);
  EXPECT_EQ(pool.held(), 2);
  EXPECT_EQ(pool.working(), 0);
  EXPECT_EQ(pool.running().size(), 2u);
  EXPECT_EQ(pool.claimable(), 0);
  EXPECT_TRUE(gate_.started().empty());  // no thread exists yet to start them
  pool.start();
  ASSERT_TRUE(gate_.wait_started(2));
  EXPECT_EQ(pool.held(), 0);
  gate_.release_all();
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
  std::lock_guard lock(mutex_);
  ASSERT_EQ(completions_.size(), 2u);
  for (const auto& completion : completions_) EXPECT_EQ(completion.outcome, Outcome::kDone);
}

// The fetcher's first claim asks the pool for its free slots and submits, while start()
// is still making the threads (64 took 20 ms or more): making them must not hold the lock
// those calls take, or the first job waits for the last thread.
TEST_F(WorkerPoolTest, AJobIsTakenWhileTheOtherThreadsAreStillBeingMade) {
  std::promise<void> go_on;
  std::shared_future<void> may_go_on = go_on.get_future().share();
  std::atomic<int> made{0};
  std::atomic<bool> making_second{false};
  pool_ = std::make_unique<WorkerPool>(
      workers(2), [this](const Job& job, const JobStop& stop) { return gate_.execute(job, stop); },
      [](Completion) {}, [](int, bool) {}, [this] { return now_.load(); },
      [&](std::function<void()> body) {
        if (++made == 2) {  // the second thread's making is held up until the test says
          making_second = true;
          may_go_on.wait_for(seconds(10));
          making_second = false;
        }
        return std::thread(std::move(body));
      });
  WorkerPool& pool = *pool_;
  std::jthread starter([&] { pool.start(); });  // joined on an early return too
  ASSERT_TRUE(wait_until([&] { return making_second.load(); }, seconds(20)));
  EXPECT_EQ(as_map(pool.free_slots(false)), (Slots{{"default", 2}}));
  pool.submit({job_in(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_TRUE(making_second.load()) << "the job waited for the second thread to be made";
  go_on.set_value();
  starter.join();
  EXPECT_EQ(made.load(), 2);
  gate_.release_all();
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
}

// A pool destroyed before it started (the daemon's start failed after a claim) neither
// runs nor completes what it held: drain hands those jobs back (release_queued). Under
// ASan this also checks that the held jobs are freed.
TEST_F(WorkerPoolTest, APoolNeverStartedEndsWithoutRunningWhatItHeld) {
  make_pool(workers(2)).submit({job_in(1), job_in(2)});
  pool_.reset();
  EXPECT_TRUE(gate_.started().empty());
  std::lock_guard lock(mutex_);
  EXPECT_TRUE(completions_.empty());
}

// A job released while its worker still hands over the completion can be claimed again,
// same id and attempt: the pool keeps each submission apart (counted and freed on its
// own).
TEST_F(WorkerPoolTest, TheSameAttemptClaimedAgainWhileInHandIsKeptApart) {
  WorkerPool& pool = make_pool(workers(2));
  pool.start();
  {
    std::lock_guard lock(mutex_);
    hold_handover_ = true;
  }
  gate_.release(1);
  pool.submit({job_in(1)});
  {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(cv_.wait_for(lock, seconds(20), [&] { return completions_.size() == 1; }));
  }
  pool.submit({job_in(1)});
  {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(cv_.wait_for(lock, seconds(20), [&] { return completions_.size() == 2; }));
  }
  // Both handlers returned; both attempts are still in hand, handing over.
  EXPECT_EQ(pool.busy(), 2);
  EXPECT_EQ(pool.running(), (std::vector<JobAttempt>{{1, 1}, {1, 1}}));
  EXPECT_TRUE(pool.still_running({{1, 1}}).empty());
  open_handover();
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
  EXPECT_EQ(pool.busy(), 0);
  EXPECT_TRUE(pool.running().empty());
  EXPECT_EQ(pool.claimable(), 2);
}

TEST_F(WorkerPoolTest, ReleaseQueuedHandsBackTheHeldJobsWithoutRunningThem) {
  WorkerPool& pool = make_pool(workers(1));
  pool.start();
  pool.submit({job_in(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  pool.submit({job_in(2), job_in(3)});
  const std::vector<JobAttempt> released = pool.release_queued();
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[0].id, 2);
  EXPECT_EQ(released[1].id, 3);
  EXPECT_EQ(pool.busy(), 1);
  EXPECT_EQ(pool.working(), 1);
  EXPECT_EQ(pool.running().size(), 1u);
  EXPECT_TRUE(pool.release_queued().empty());
  gate_.release(1);
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
  EXPECT_EQ(gate_.started(), (std::vector<std::int64_t>{1}));
  std::lock_guard lock(mutex_);
  EXPECT_EQ(completions_.size(), 1u);  // the released ones' are the caller's to write
}

TEST_F(WorkerPoolTest, AHeldJobStoppedBeforeItStartsReachesTheExecutorStopped) {
  WorkerPool& pool = make_pool(workers(1));
  pool.start();
  pool.submit({job_in(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  pool.submit({job_in(2)});
  EXPECT_EQ(pool.cancel_jobs({{2, 1}}).size(), 1u);  // held: not yet started, still cancellable
  gate_.release(1);
  ASSERT_TRUE(gate_.wait_stopped(2));
}

TEST_F(WorkerPoolTest, OnceArmedOnlyTheJobThatFreesEnoughSlotsWakesTheFetcher) {
  WorkerPool& pool = make_pool(workers(4));
  pool.start();
  pool.submit({job_in(1), job_in(2), job_in(3), job_in(4)});
  ASSERT_TRUE(gate_.wait_started(4));
  EXPECT_FALSE(pool.arm_slot_wake(2));  // none free: armed for the second slot to free

  gate_.release(1);
  ASSERT_TRUE(
      wait_until([&] { return pool.busy() == 3 && pool.running().size() == 3; }, seconds(20)));
  gate_.release(2);  // the second: the one wake-up, then the pool is disarmed
  ASSERT_TRUE(wait_freed(1));
  gate_.release(3);
  ASSERT_TRUE(wait_until([&] { return pool.running().size() == 1; }, seconds(20)));
  gate_.release(4);  // the pool falls idle: the busy gauge is told, not the fetcher
  ASSERT_TRUE(wait_freed(2));
  std::lock_guard lock(mutex_);
  EXPECT_EQ(events_, (std::vector<std::string>{"complete 1", "complete 2", "freed busy=2 fetcher",
                                               "complete 3", "complete 4", "freed busy=0"}));
}

// With prefetch, a job that finishes quickly also adds to what the pool may hold beyond its
// threads (PrefetchBudget), so an armed wake-up counts claimable jobs, that budget
// included, not freed slots: here one job leaving makes two claimable.
TEST_F(WorkerPoolTest, AnArmedWakeUpCountsThePrefetchBudgetAFinishingJobAdds) {
  WorkerPool& pool = make_pool(workers(2, {{"default", 0}}, 100));
  pool.start();
  pool.submit({job_in(1), job_in(2)});
  ASSERT_TRUE(gate_.wait_started(2));
  EXPECT_FALSE(pool.arm_slot_wake(2));  // none free, and no budget before a job finished
  gate_.release(1);  // frees its slot and, finished at once by the test's clock, adds one
  ASSERT_TRUE(wait_freed(1));
  EXPECT_EQ(pool.claimable(), 2);
  std::lock_guard lock(mutex_);
  EXPECT_EQ(events_, (std::vector<std::string>{"complete 1", "freed busy=1 fetcher"}));
}

TEST_F(WorkerPoolTest, ArmingWhenEnoughAreFreeSaysSoAndAQueueLimitAlwaysWakes) {
  WorkerPool& pool = make_pool(workers(4, {{"a", 1}, {"b", 0}}));
  pool.start();
  pool.submit({job_in(1, "a"), job_in(2, "b"), job_in(3, "b")});
  ASSERT_TRUE(gate_.wait_started(3));
  EXPECT_TRUE(pool.arm_slot_wake(1));   // one free already: look again, nothing armed
  EXPECT_FALSE(pool.arm_slot_wake(0));  // nothing wanted
  gate_.release(2);
  ASSERT_TRUE(wait_until([&] { return pool.running().size() == 2; }, seconds(20)));
  gate_.release(1);  // queue a's own slot: a saturated queue may be waiting for it
  ASSERT_TRUE(wait_freed(1));
  std::lock_guard lock(mutex_);
  EXPECT_EQ(events_,
            (std::vector<std::string>{"complete 2", "complete 1", "freed busy=1 fetcher"}));
}

TEST_F(WorkerPoolTest, MoreJobsThanWaitingThreadsWakeThemAll) {
  WorkerPool& pool = make_pool(workers(3, {{"default", 0}}, 100));
  pool.start();
  // Held jobs need a measured pace (PrefetchBudget): three short jobs finish first.
  pool.submit({job_in(1), job_in(2), job_in(3)});
  ASSERT_TRUE(gate_.wait_started(3));
  for (int id = 1; id <= 3; ++id) gate_.release(id);
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
  ASSERT_GE(pool.claimable(), 6);
  std::vector<Job> jobs;
  for (int id = 10; id < 16; ++id) jobs.push_back(job_in(id));
  pool.submit(std::move(jobs));  // six jobs, three idle threads: notify_all
  ASSERT_TRUE(gate_.wait_started(6));
  for (int id = 10; id < 16; ++id) gate_.release(id);
  ASSERT_TRUE(gate_.wait_started(9));
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(20)));
  std::lock_guard lock(mutex_);
  EXPECT_EQ(completions_.size(), 9u);
}

// Jobs handed over (an http request in flight, JobRunner::start) free their threads but keep
// their slots: with concurrency 2, a third job held for a thread starts only when one of the
// two ends, though both threads are free, and then on the thread that ended it (no worker
// woken for it); heartbeats and stops still reach them; and stop() waits for them to end.
TEST(WorkerPoolHandOffTest, HandedOverJobsKeepTheirSlotsUntilTheyEnd) {
  std::mutex mutex;
  std::map<std::int64_t, JobFinish> finishes;
  std::map<std::int64_t, const JobStop*> stops;
  std::map<std::int64_t, std::thread::id> started_on;
  std::vector<std::int64_t> completed;
  WorkerPool pool(
      workers(2),
      [&](const Job& job, const JobStop& stop, const JobFinish& finish) {
        std::lock_guard lock(mutex);
        finishes[job.id] = finish;
        stops[job.id] = &stop;
        started_on[job.id] = std::this_thread::get_id();
        return JobStarted{true, std::nullopt};
      },
      [](const Job&) { return true; },
      [&](Completion completion) {
        std::lock_guard lock(mutex);
        completed.push_back(completion.job.id);
      },
      [](int, bool) {});
  pool.start();
  pool.submit({job_in(1), job_in(2), job_in(3)});
  const auto started = [&] {
    std::lock_guard lock(mutex);
    return finishes.size();
  };
  ASSERT_TRUE(wait_until([&] { return started() == 2; }, seconds(10)));
  EXPECT_EQ(pool.held(), 1);
  EXPECT_EQ(pool.claimable(), 0);
  EXPECT_EQ(pool.still_running({{1, 1}, {2, 1}}).size(), 2U);
  pool.stop_jobs({{1, 1}});
  {
    std::lock_guard lock(mutex);
    EXPECT_TRUE(stops[1]->stop_requested());
  }
  JobFinish first;
  {
    std::lock_guard lock(mutex);
    first = finishes[1];
  }
  first(Completion{{1, 1}, Outcome::kReleased, {}, Millis(0)});
  ASSERT_TRUE(wait_until([&] { return started() == 3; }, seconds(10)));
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(started_on[3], std::this_thread::get_id());
  }
  EXPECT_EQ(pool.held(), 0);
  EXPECT_EQ(pool.running().size(), 2U);

  pool.request_stop();
  auto stopped = std::async(std::launch::async, [&pool] { pool.join(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  std::vector<JobFinish> rest;
  {
    std::lock_guard lock(mutex);
    rest = {finishes[2], finishes[3]};
  }
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const std::int64_t id = static_cast<std::int64_t>(i) + 2;
    rest[i](Completion{{id, 1}, Outcome::kDone, {}, Millis(0)});
  }
  stopped.get();
  std::lock_guard lock(mutex);
  EXPECT_EQ(completed, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_TRUE(pool.running().empty());
}

// Jobs handed over start on the thread that submits them (the fetcher's): no worker is woken
// for a hand-off of a microsecond. One that holds its thread still goes to a worker.
TEST(WorkerPoolHandOffTest, HandedOverJobsStartOnTheSubmittingThread) {
  std::mutex mutex;
  std::map<std::int64_t, std::thread::id> started_on;
  std::map<std::int64_t, JobFinish> finishes;
  WorkerPool pool(
      workers(4),
      [&](const Job& job, const JobStop&, const JobFinish& finish) {
        std::lock_guard lock(mutex);
        started_on[job.id] = std::this_thread::get_id();
        if (job.id == 3) return JobStarted{false, std::nullopt};  // ran in place
        finishes[job.id] = finish;
        return JobStarted{true, std::nullopt};
      },
      [](const Job& job) { return job.id != 3; }, [](Completion) {}, [](int, bool) {});
  // Submitted before the workers start: a worker thread just started would take a held job
  // from the queue itself (it never waited), which is allowed and would say nothing here.
  pool.submit({job_in(1), job_in(2)});
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(started_on.size(), 2U);  // before submit returned
    EXPECT_EQ(started_on[1], std::this_thread::get_id());
    EXPECT_EQ(started_on[2], std::this_thread::get_id());
  }
  pool.start();
  pool.submit({job_in(3)});
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard lock(mutex);
        return started_on.count(3) == 1;
      },
      seconds(10)));
  {
    std::lock_guard lock(mutex);
    EXPECT_NE(started_on[3], std::this_thread::get_id());
  }
  std::map<std::int64_t, JobFinish> rest;
  {
    std::lock_guard lock(mutex);
    rest = finishes;
  }
  // Whatever was started ends, so that a failure above fails the test instead of hanging
  // it in the pool's destructor.
  for (auto& [id, finish] : rest) finish(Completion{{id, 1}, Outcome::kDone, {}, Millis(0)});
  ASSERT_TRUE(pool.wait_idle(Clock::now() + seconds(10)));
}

// Stopping with held jobs and every slot taken by handed-over jobs: each thread waits for a
// slot; once the last held job is taken, the others must hear of it and exit, or join()
// would wait for them forever.
TEST(WorkerPoolHandOffTest, StoppingWithHeldJobsEndsOnceTheyHaveRun) {
  std::mutex mutex;
  std::map<std::int64_t, JobFinish> finishes;
  WorkerPool pool(
      workers(2),
      [&](const Job& job, const JobStop&, const JobFinish& finish) {
        std::lock_guard lock(mutex);
        finishes[job.id] = finish;
        return JobStarted{true, std::nullopt};
      },
      [](const Job&) { return true; }, [](Completion) {}, [](int, bool) {});
  pool.start();
  pool.submit({job_in(1), job_in(2), job_in(3), job_in(4)});
  const auto finish_of = [&](std::int64_t id) -> JobFinish {
    EXPECT_TRUE(wait_until(
        [&] {
          std::lock_guard lock(mutex);
          return finishes.count(id) == 1;
        },
        seconds(10)));
    std::lock_guard lock(mutex);
    return finishes[id];
  };
  const JobFinish first = finish_of(1);
  const JobFinish second = finish_of(2);
  pool.request_stop();
  auto stopped = std::async(std::launch::async, [&pool] { pool.join(); });
  // Job 3 takes the slot job 1 frees; its thread goes back to waiting (for job 4) while
  // the test looks for it, and job 4 then goes to the other thread.
  first(Completion{{1, 1}, Outcome::kDone, {}, Millis(0)});
  const JobFinish third = finish_of(3);
  second(Completion{{2, 1}, Outcome::kDone, {}, Millis(0)});
  third(Completion{{3, 1}, Outcome::kDone, {}, Millis(0)});
  finish_of(4)(Completion{{4, 1}, Outcome::kDone, {}, Millis(0)});
  ASSERT_EQ(stopped.wait_for(seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace pgjobd
