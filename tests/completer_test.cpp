// Completer: many completions become few writes, in order; an outage loses and duplicates
// nothing; stopping flushes within the deadline and gives up (loudly) after it.

#include "engine/completer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <tuple>
#include <vector>

#include "engine/health.hpp"
#include "metrics/metrics.hpp"
#include "support/fake_job_store.hpp"
#include "support/log_capture.hpp"
#include "support/metrics_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::FakeStatus;
using pgjobd::testing::LogCapture;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

std::vector<std::int64_t> ids_of(const std::vector<Completion>& completions) {
  std::vector<std::int64_t> ids;
  for (const auto& completion : completions) ids.push_back(completion.job.id);
  return ids;
}

class CompleterTest : public ::testing::Test {
 protected:
  void TearDown() override { table_.unblock_all(); }

  Completer& make_completer(bool delete_done = false) {
    completer_ = std::make_unique<Completer>(database_.open_store("completer", StoreUse::kHotPath),
                                             "worker-1", delete_done, metrics_, health_);
    return *completer_;
  }

  // `n` jobs running under worker-1 (claimed in the fake), each with a "done" completion.
  std::vector<Completion> running_jobs(int n) {
    table_.add_jobs(n, "t");
    auto store = database_.open_store("test", StoreUse::kOccasional);
    const auto jobs = store->claim({{{"default", n}}, {"t"}, n, "worker-1", Millis(30000)});
    std::vector<Completion> completions;
    for (const Job& job : jobs) {
      completions.push_back({{job.id, job.attempt}, Outcome::kDone, {}, Millis(0)});
    }
    return completions;
  }

  bool wait_written(std::size_t n) {
    return table_.wait_until([&] { return table_.completions().size() >= n; });
  }

  FakeDatabase database_;
  FakeJobTable& table_ = database_.table();
  Metrics metrics_{{"default"}, {"t"}};
  Health health_;
  std::unique_ptr<Completer> completer_;  // last
};

TEST_F(CompleterTest, CompletionsSubmittedTogetherShareOneWrite) {
  const auto completions = running_jobs(100);
  Completer& completer = make_completer();
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();
  ASSERT_TRUE(wait_written(100));
  const auto calls = table_.completed();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(ids_of(calls[0].batch), ids_of(completions));
  EXPECT_EQ(calls[0].worker_id, "worker-1");
  EXPECT_EQ(table_.count(FakeStatus::kDone), 100);
}

TEST_F(CompleterTest, CompletionsArrivingDuringAWriteShareTheNextOne) {
  const auto completions = running_jobs(301);
  Completer& completer = make_completer();
  table_.block(StoreMethod::kComplete);
  completer.start();
  completer.submit(completions[0]);
  ASSERT_TRUE(table_.wait_held(StoreMethod::kComplete));
  for (std::size_t i = 1; i < completions.size(); ++i) completer.submit(completions[i]);
  table_.unblock(StoreMethod::kComplete);

  ASSERT_TRUE(wait_written(301));
  const auto calls = table_.completed();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].batch.size(), 1u);
  EXPECT_EQ(calls[1].batch.size(), 300u);
  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));
}

// The flush delay waits for completions that may share the write; once every job the pool
// holds has its completion queued, none can come, and the batch goes at once (a chain of
// dependent jobs waited the delay at each link). With a delay of an hour, only that ends
// the waits here.
TEST_F(CompleterTest, ABatchGoesOnceEveryJobInHandHasItsCompletion) {
  const auto completions = running_jobs(4);
  Completer& completer = make_completer();
  std::atomic<int> in_hand = 3;
  completer.set_in_hand([&] { return in_hand.load(); });
  completer.set_flush_delay(std::chrono::hours(1));
  completer.start();
  completer.submit(completions[0]);
  completer.submit(completions[1]);
  completer.submit(completions[2]);  // the third of three in hand
  ASSERT_TRUE(wait_written(3));
  in_hand = 1;
  completer.submit(completions[3]);  // the only one in hand
  ASSERT_TRUE(wait_written(4));
  const auto calls = table_.completed();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].batch.size(), 3u);
  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));
}

// While many more jobs are in hand than completions queued (Completer::kGatherInHand), more
// are sure to come: the batch gathers past the flush delay (here for an hour), and goes once
// every job in hand has its completion queued. With few in hand the flush delay rules again.
// Before the gather, the first completion went alone after the 1 ms delay.
TEST_F(CompleterTest, ABatchGathersLongerWhileManyJobsAreInHand) {
  const auto completions = running_jobs(3);
  Completer& completer = make_completer();
  std::atomic<int> in_hand = 1000;
  completer.set_in_hand([&] { return in_hand.load(); });
  completer.set_flush_delay(milliseconds(1));
  completer.set_gather_delay(std::chrono::hours(1));
  completer.start();
  completer.submit(completions[0]);
  EXPECT_FALSE(table_.wait_until([&] { return !table_.completed().empty(); }, milliseconds(200)));
  in_hand = 2;
  completer.submit(completions[1]);  // the last of the two in hand
  ASSERT_TRUE(wait_written(2));
  in_hand = Completer::kGatherInHand;  // one short of kGatherInHand to come, with this one
  completer.submit(completions[2]);
  ASSERT_TRUE(wait_written(3));
  const auto calls = table_.completed();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(ids_of(calls[0].batch), ids_of({completions[0], completions[1]}));
  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));
}

// After each write the completer tells what it made due (the store's report), and after a
// write that failed, which may have committed, that the daemon must claim as for a NOTIFY.
TEST_F(CompleterTest, TellsWhatEachWriteMadeDue) {
  const auto completions = running_jobs(2);
  Completer& completer = make_completer();
  std::mutex mutex;
  std::vector<std::tuple<std::vector<std::int64_t>, bool, int>> told;
  completer.set_on_due([&](const std::vector<std::int64_t>& unblocked, bool other_due, int pid) {
    std::lock_guard lock(mutex);
    told.emplace_back(unblocked, other_due, pid);
  });
  const auto told_count = [&] {
    std::lock_guard lock(mutex);
    return told.size();
  };
  table_.set_completion_news({41, 42}, false, 7);
  completer.start();
  completer.submit(completions[0]);
  ASSERT_TRUE(wait_until([&] { return told_count() == 1; }, seconds(10)));
  table_.throw_next(StoreMethod::kComplete, 1);
  completer.submit(completions[1]);
  ASSERT_TRUE(
      wait_until([&] { return told_count() == 3; }, seconds(20)));  // the failure, then the retry
  std::lock_guard lock(mutex);
  EXPECT_EQ(told[0], std::make_tuple(std::vector<std::int64_t>{41, 42}, false, 7));
  EXPECT_EQ(told[1], std::make_tuple(std::vector<std::int64_t>{}, true, 0));
  EXPECT_EQ(told[2], std::make_tuple(std::vector<std::int64_t>{}, false, 0));
}

TEST_F(CompleterTest, BatchesAreCappedAtMaxBatch) {
  const auto completions = running_jobs(2500);
  Completer& completer = make_completer();
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();
  ASSERT_TRUE(wait_written(2500));
  const auto calls = table_.completed();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].batch.size(), Completer::kMaxBatch);
  EXPECT_EQ(calls[1].batch.size(), Completer::kMaxBatch);
  EXPECT_EQ(calls[2].batch.size(), 500u);
  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));
}

TEST_F(CompleterTest, OutageLosesAndDuplicatesNothingAndKeepsTheOrder) {
  const auto completions = running_jobs(10);
  Completer& completer = make_completer();
  table_.fail_next(StoreMethod::kComplete, 1000);  // the database is down
  for (std::size_t i = 0; i < 5; ++i) completer.submit(completions[i]);
  completer.start();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, 2));
  EXPECT_NE(health_.problems().find("completer: fake complete: connection lost"), std::string::npos)
      << health_.problems();
  for (std::size_t i = 5; i < 10; ++i) completer.submit(completions[i]);
  EXPECT_EQ(completer.queued_jobs().size(), 10u);  // kept, not dropped
  const auto times = table_.call_times(StoreMethod::kComplete);
  EXPECT_GE(times[1] - times[0], milliseconds(80));  // backed off, not hammering

  table_.fail_next(StoreMethod::kComplete, 0);  // back up
  ASSERT_TRUE(wait_written(10));
  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));  // once each, in order
  EXPECT_EQ(table_.count(FakeStatus::kDone), 10);
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));
  EXPECT_TRUE(wait_until([&] { return health_.problems().empty(); }, seconds(20)))
      << health_.problems();
}

// The batch kept through an outage is topped up from what arrived meanwhile, never past
// kMaxBatch, and the rest follows in order.
TEST_F(CompleterTest, AnOutageWithMoreThanABatchInHandKeepsTheCapAndTheOrder) {
  const auto completions = running_jobs(1500);
  Completer& completer = make_completer();
  table_.fail_next(StoreMethod::kComplete, 1000);  // the database is down
  for (std::size_t i = 0; i < 600; ++i) completer.submit(completions[i]);
  completer.start();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, 1));
  for (std::size_t i = 600; i < completions.size(); ++i) completer.submit(completions[i]);
  EXPECT_EQ(completer.queued_jobs().size(), 1500u);
  table_.fail_next(StoreMethod::kComplete, 0);  // back up

  ASSERT_TRUE(wait_written(1500));
  const auto calls = table_.completed();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].batch.size(), Completer::kMaxBatch);
  EXPECT_EQ(calls[1].batch.size(), 500u);
  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));  // once each, in order
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));
}

TEST_F(CompleterTest, QueuedJobsIncludeTheBatchBeingWritten) {
  const auto completions = running_jobs(4);
  Completer& completer = make_completer();
  table_.block(StoreMethod::kComplete);
  completer.start();
  for (std::size_t i = 0; i < 3; ++i) completer.submit(completions[i]);
  ASSERT_TRUE(table_.wait_held(StoreMethod::kComplete));
  // Still unwritten: the maintenance must keep heartbeating these.
  EXPECT_EQ(completer.queued_jobs(),
            (std::vector<JobAttempt>{completions[0].job, completions[1].job, completions[2].job}));
  completer.submit(completions[3]);
  EXPECT_EQ(completer.queued_jobs().size(), 4u);

  table_.unblock(StoreMethod::kComplete);
  ASSERT_TRUE(wait_written(4));
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));
}

TEST_F(CompleterTest, StopFlushesWhatWasSubmittedWithinTheDeadline) {
  const auto completions = running_jobs(5);
  Completer& completer = make_completer();
  table_.block(StoreMethod::kComplete);
  completer.start();
  for (std::size_t i = 0; i < 3; ++i) completer.submit(completions[i]);
  ASSERT_TRUE(table_.wait_held(StoreMethod::kComplete));
  for (std::size_t i = 3; i < 5; ++i) completer.submit(completions[i]);
  table_.fail_next(StoreMethod::kComplete, 1);  // and the held write will fail

  completer.set_flush_deadline(Clock::now() + seconds(20));
  completer.request_stop();
  table_.unblock(StoreMethod::kComplete);
  completer.join();

  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));
  EXPECT_TRUE(completer.queued_jobs().empty());
}

TEST_F(CompleterTest, GivesUpAfterTheDeadlineAndSaysSo) {
  LogCapture log;  // before the completer's thread starts
  const auto completions = running_jobs(3);
  Completer& completer = make_completer();
  table_.fail_next(StoreMethod::kComplete, 1000);  // the outage outlasts the deadline
  completer.start();
  for (const auto& completion : completions) completer.submit(completion);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, 1));

  const auto deadline = Clock::now() + milliseconds(300);
  completer.set_flush_deadline(deadline);
  completer.request_stop();
  completer.join();

  EXPECT_GE(Clock::now(), deadline);  // it kept trying until then
  EXPECT_LT(Clock::now() - deadline, seconds(10));
  EXPECT_GE(table_.calls(StoreMethod::kComplete), 2);
  EXPECT_TRUE(table_.completed().empty());
  EXPECT_TRUE(completer.queued_jobs().empty());
  EXPECT_TRUE(log.contains("giving up on 3 unwritten completions")) << log.all();
  EXPECT_EQ(completer.unwritten_at_stop(), 3);
  EXPECT_EQ(table_.count(FakeStatus::kRunning), 3);  // left for the rescuer
}

// One row the database refuses (an out-of-range interval) must not hold up the others:
// before, the batch failed whole and was retried forever.
TEST_F(CompleterTest, RowTheDatabaseRefusesIsDroppedAndTheRestWrittenInOrder) {
  LogCapture log;  // before the completer's thread starts
  const auto completions = running_jobs(50);
  const std::int64_t poisoned = completions[20].job.id;
  table_.poison_completion(poisoned);
  Completer& completer = make_completer();
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();
  ASSERT_TRUE(wait_written(49));
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));

  std::vector<std::int64_t> expected = ids_of(completions);
  expected.erase(expected.begin() + 20);
  EXPECT_EQ(ids_of(table_.completions()), expected);  // once each, in order
  EXPECT_EQ(table_.count(FakeStatus::kDone), 49);
  EXPECT_EQ(table_.row(poisoned).status, FakeStatus::kRunning);  // left for the rescuer
  EXPECT_TRUE(
      log.contains("dropping the completion of job " + std::to_string(poisoned) + " attempt 1"))
      << log.all();
  EXPECT_TRUE(log.contains("22008")) << log.all();
  EXPECT_TRUE(health_.problems().empty()) << health_.problems();
}

// Only a row's own data makes it unwritable: a read-only server (or a statement timeout,
// too many connections) refuses every row alike, and dropping rows for it would turn an
// outage into duplicate runs. The whole batch waits and is written once the server takes it.
TEST_F(CompleterTest, ServerRefusalThatIsNotTheRowsFaultDropsNothing) {
  LogCapture log;
  const auto completions = running_jobs(2);
  // Three refusals: enough for a completer that split on them to drop both rows.
  table_.fail_next(StoreMethod::kComplete, 3, "25006");  // read_only_sql_transaction
  Completer& completer = make_completer();
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();
  ASSERT_TRUE(wait_written(2));
  EXPECT_EQ(ids_of(table_.completions()), ids_of(completions));  // once each, in order
  EXPECT_EQ(table_.count(FakeStatus::kDone), 2);
  EXPECT_FALSE(log.contains("dropping the completion")) << log.all();
}

// A lost connection keeps today's rule (the same batch again, in order, after a backoff)
// even when that batch then turns out to hold a row the database refuses.
TEST_F(CompleterTest, OutageBeforeARefusedRowLosesNothing) {
  const auto completions = running_jobs(8);
  const std::int64_t poisoned = completions[6].job.id;
  table_.poison_completion(poisoned);
  table_.fail_next(StoreMethod::kComplete, 1);
  Completer& completer = make_completer();
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();

  std::vector<std::int64_t> expected = ids_of(completions);
  expected.erase(expected.begin() + 6);
  ASSERT_TRUE(wait_written(7));
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));
  EXPECT_EQ(ids_of(table_.completions()), expected);
  EXPECT_EQ(table_.row(poisoned).status, FakeStatus::kRunning);
}

TEST_F(CompleterTest, StopWithoutAFlushDeadlineDoesNotWaitOutAnOutage) {
  const auto completions = running_jobs(1);
  Completer& completer = make_completer();
  table_.fail_next(StoreMethod::kComplete, 1000);
  completer.start();
  completer.submit(completions[0]);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, 1));
  const auto before = Clock::now();
  completer.stop();
  EXPECT_LT(Clock::now() - before, seconds(10));
  EXPECT_TRUE(completer.queued_jobs().empty());
}

TEST_F(CompleterTest, DeleteDoneFollowsTheLatestSetting) {
  const auto completions = running_jobs(2);
  Completer& completer = make_completer(/*delete_done=*/false);
  completer.start();
  completer.submit(completions[0]);
  ASSERT_TRUE(wait_written(1));
  completer.set_delete_done(true);
  completer.submit(completions[1]);
  ASSERT_TRUE(wait_written(2));
  const auto calls = table_.completed();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_FALSE(calls[0].delete_done);
  EXPECT_TRUE(calls[1].delete_done);
  EXPECT_TRUE(table_.row(completions[1].job.id).deleted);
}

// The fetcher learns of this daemon's retries from the completer, after they are written
// (so it never wakes before the row says the retry is due): the shortest delay per batch.
TEST_F(CompleterTest, TellsTheShortestRetryDelayOnceTheBatchIsWritten) {
  auto completions = running_jobs(4);
  completions[1].outcome = Outcome::kRetry;
  completions[1].retry_delay = Millis(7000);
  completions[2].outcome = Outcome::kRetry;
  completions[2].retry_delay = Millis(3000);
  Completer& completer = make_completer();
  std::mutex mutex;
  std::vector<std::pair<Millis, std::size_t>> told;  // delay, completions written by then
  completer.set_on_retries_written([&](Millis delay) {
    std::lock_guard lock(mutex);
    told.emplace_back(delay, table_.completions().size());
  });
  table_.fail_next(StoreMethod::kComplete, 1);  // a failed write tells nothing
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();
  ASSERT_TRUE(wait_written(4));
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard lock(mutex);
        return !told.empty();
      },
      seconds(20)));
  completer.stop();
  std::lock_guard lock(mutex);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].first, Millis(3000));
  EXPECT_EQ(told[0].second, 4u);  // after the write
}

// A row another session holds locked (an application's open transaction) must not hold up
// the other completions: the batch is written but for it, later batches go on, and the
// held one is retried alone, logged once, until the row is free. Meanwhile its attempt
// stays in queued_jobs(), so heartbeats keep its lease.
TEST_F(CompleterTest, AHeldRowIsRetriedAloneWithoutHoldingBackTheOthers) {
  LogCapture log;  // before the completer's thread starts
  const auto completions = running_jobs(30);
  const JobAttempt held = completions[5].job;
  table_.hold_row(held.id);
  Completer& completer = make_completer();
  for (std::size_t i = 0; i < 10; ++i) completer.submit(completions[i]);
  completer.start();
  ASSERT_TRUE(wait_written(9));
  // Later batches are written while the row is still held, and the held one is tried
  // again (a write of it alone) more than once.
  for (std::size_t i = 10; i < 20; ++i) completer.submit(completions[i]);
  ASSERT_TRUE(wait_written(19));
  for (std::size_t i = 20; i < 30; ++i) completer.submit(completions[i]);
  ASSERT_TRUE(wait_written(29));
  const int calls = table_.calls(StoreMethod::kComplete);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, calls + 2));  // tried again, alone
  EXPECT_EQ(table_.row(held.id).status, FakeStatus::kRunning);
  EXPECT_EQ(completer.queued_jobs(), std::vector<JobAttempt>{held});
  EXPECT_NE(testing::scrape(metrics_).find("pgjobd_completions_waiting_for_row_lock 1"),
            std::string::npos);

  table_.release_row(held.id);
  ASSERT_TRUE(wait_written(30));
  EXPECT_EQ(table_.row(held.id).status, FakeStatus::kDone);
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));
  EXPECT_EQ(table_.count(FakeStatus::kDone), 30);
  // Each completion written once.
  std::vector<std::int64_t> written = ids_of(table_.completions());
  std::sort(written.begin(), written.end());
  std::vector<std::int64_t> expected = ids_of(completions);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(written, expected);
  EXPECT_EQ(log.count("job " + std::to_string(held.id) +
                      ": its row is locked by another session; its completion is retried"),
            1)
      << log.all();
  const std::string text = testing::scrape(metrics_);
  EXPECT_NE(text.find("pgjobd_completions_held_total 1"), std::string::npos) << text;
  EXPECT_NE(text.find("pgjobd_completions_waiting_for_row_lock 0"), std::string::npos) << text;
  EXPECT_NE(text.find("pgjobd_stale_writes_total 0"), std::string::npos) << text;
}

// A row held at one write only (the daemon's own heartbeat holds a job's row for the
// milliseconds of its write, and a batch meeting it skips that row) is written at the
// retry, and is not reported: only a row still held then is another session's.
TEST_F(CompleterTest, ARowHeldAtOneWriteOnlyIsWrittenAtTheRetryUnreported) {
  LogCapture log;  // before the completer's thread starts
  const auto completions = running_jobs(10);
  const JobAttempt held = completions[3].job;
  table_.hold_row_once(held.id);
  Completer& completer = make_completer();
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();
  ASSERT_TRUE(wait_written(10));
  EXPECT_EQ(table_.row(held.id).status, FakeStatus::kDone);
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));
  EXPECT_GE(table_.calls(StoreMethod::kComplete), 2);  // the batch, then the retry alone
  EXPECT_EQ(log.count("its row is locked by another session"), 0) << log.all();
  const std::string text = testing::scrape(metrics_);
  EXPECT_NE(text.find("pgjobd_completions_held_total 0"), std::string::npos) << text;
  EXPECT_NE(text.find("pgjobd_completions_waiting_for_row_lock 0"), std::string::npos) << text;
}

// The retries back off (250 ms, doubling to 2 s): a row held for long costs a write every
// 2 s, not a busy loop.
TEST_F(CompleterTest, RetriesOfAHeldRowBackOff) {
  const auto completions = running_jobs(1);
  table_.hold_row(completions[0].job.id);
  Completer& completer = make_completer();
  completer.submit(completions[0]);
  const auto start = Clock::now();
  completer.start();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, 4));  // 0, 0.25, 0.75, 1.75 s
  const auto times = table_.call_times(StoreMethod::kComplete);
  EXPECT_GE(times[1] - times[0], Completer::kHeldRetryFirst);
  EXPECT_GE(times[2] - times[1], 2 * Completer::kHeldRetryFirst);
  EXPECT_GE(times[3] - times[2], 4 * Completer::kHeldRetryFirst);
  EXPECT_GE(Clock::now() - start, 7 * Completer::kHeldRetryFirst);
  table_.release_row(completions[0].job.id);
  ASSERT_TRUE(wait_written(1));
}

// A held job that turned stale meanwhile (its lease ran out and it was rescued) is counted
// stale, not written.
TEST_F(CompleterTest, AHeldRowThatIsNoLongerOursEndsStale) {
  const auto completions = running_jobs(1);
  const JobAttempt held = completions[0].job;
  table_.hold_row(held.id);
  Completer& completer = make_completer();
  completer.submit(completions[0]);
  completer.start();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, 1));
  table_.take_over(held.id);
  table_.release_row(held.id);
  EXPECT_TRUE(wait_until([&] { return completer.queued_jobs().empty(); }, seconds(20)));
  EXPECT_TRUE(table_.completions().size() >= 1u);
  EXPECT_EQ(table_.row(held.id).status, FakeStatus::kRunning);  // the other daemon's
  EXPECT_NE(testing::scrape(metrics_).find("pgjobd_stale_writes_total 1"), std::string::npos);
}

// A drain does not wait for a held row past the flush deadline: the completion counts as
// unwritten (the job returns when its lease expires), and the rest are written.
TEST_F(CompleterTest, AHeldRowAtTheFlushDeadlineCountsAsUnwritten) {
  LogCapture log;
  const auto completions = running_jobs(3);
  table_.hold_row(completions[1].job.id);
  Completer& completer = make_completer();
  for (const auto& completion : completions) completer.submit(completion);
  completer.start();
  ASSERT_TRUE(wait_written(2));
  const auto deadline = Clock::now() + milliseconds(600);
  completer.set_flush_deadline(deadline);
  completer.request_stop();
  completer.join();
  EXPECT_GE(Clock::now(), deadline);  // it kept trying until then
  EXPECT_LT(Clock::now() - deadline, seconds(10));
  EXPECT_GE(table_.calls(StoreMethod::kComplete), 2);
  EXPECT_EQ(completer.unwritten_at_stop(), 1);
  EXPECT_TRUE(completer.queued_jobs().empty());
  EXPECT_TRUE(log.contains("giving up on 1 unwritten completions")) << log.all();
  EXPECT_EQ(table_.row(completions[1].job.id).status, FakeStatus::kRunning);
  EXPECT_EQ(table_.count(FakeStatus::kDone), 2);
}

}  // namespace
}  // namespace pgjobd
