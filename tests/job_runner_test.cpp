// JobRunner: a handler's result (or exception) becomes the completion the completer writes.

#include "engine/job_runner.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "metrics/metrics.hpp"

namespace pgjobd {
namespace {

// Without jitter, so the expected backoff is exact.
RetryConfig exact_retry() {
  RetryConfig retry;
  retry.base = Millis(1000);
  retry.max_delay = Millis(600000);
  retry.jitter = 0.0;
  return retry;
}

Job job_of(const std::string& type, int attempt, int max_attempts = 5) {
  Job job;
  job.id = 42;
  job.queue = "default";
  job.type = type;
  job.attempt = attempt;
  job.max_attempts = max_attempts;
  return job;
}

class JobRunnerTest : public ::testing::Test {
 protected:
  JobRunner runner_with(HandlerTable handlers, std::size_t max_result_bytes = 65536) {
    return JobRunner(exact_retry(), std::move(handlers), metrics_, max_result_bytes);
  }
  Metrics metrics_{{"default"}, {"ok", "throws"}};
};

TEST_F(JobRunnerTest, DoneHandlerCompletesTheAttempt) {
  JobRunner runner =
      runner_with({{"ok", [](const Job&, std::stop_token) { return JobResult::done(); }}});
  const auto completion = runner.run(job_of("ok", 3), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->job, (JobAttempt{42, 3}));
  EXPECT_EQ(completion->outcome, Outcome::kDone);
  EXPECT_EQ(completion->retry_delay, Millis(0));
}

TEST_F(JobRunnerTest, ExceptionBecomesRetryWithBackoff) {
  JobRunner runner = runner_with({{"throws", [](const Job&, std::stop_token) -> JobResult {
                                     throw std::runtime_error("boom");
                                   }}});
  const auto completion = runner.run(job_of("throws", 2), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kRetry);
  EXPECT_EQ(completion->error, "handler threw: boom");
  EXPECT_EQ(completion->retry_delay, Millis(2000));  // base * 2^(attempt-1)
}

TEST_F(JobRunnerTest, NonStandardExceptionBecomesRetry) {
  JobRunner runner =
      runner_with({{"throws", [](const Job&, std::stop_token) -> JobResult { throw 7; }}});
  const auto completion = runner.run(job_of("throws", 1), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kRetry);
  EXPECT_EQ(completion->error, "handler threw a non-standard exception");
  EXPECT_EQ(completion->retry_delay, Millis(1000));
}

TEST_F(JobRunnerTest, ExhaustedAttemptsMakeTheJobDead) {
  JobRunner runner = runner_with({{"throws", [](const Job&, std::stop_token) -> JobResult {
                                     throw std::runtime_error("still broken");
                                   }}});
  const auto last = runner.run(job_of("throws", 3, 3), {});
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->outcome, Outcome::kDead);
  EXPECT_EQ(last->error, "handler threw: still broken");
  // One attempt earlier it is still a retry.
  const auto earlier = runner.run(job_of("throws", 2, 3), {});
  ASSERT_TRUE(earlier.has_value());
  EXPECT_EQ(earlier->outcome, Outcome::kRetry);
}

TEST_F(JobRunnerTest, DeadResultStaysDeadOnTheFirstAttempt) {
  JobRunner runner = runner_with(
      {{"ok", [](const Job&, std::stop_token) { return JobResult::dead("bad payload"); }}});
  const auto completion = runner.run(job_of("ok", 1), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kDead);
  EXPECT_EQ(completion->error, "bad payload");
}

TEST_F(JobRunnerTest, UnknownTypeIsReleasedWithoutCallingAnything) {
  JobRunner runner =
      runner_with({{"ok", [](const Job&, std::stop_token) { return JobResult::done(); }}});
  const auto completion = runner.run(job_of("removed-by-reload", 1), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kReleased);
  EXPECT_EQ(completion->job, (JobAttempt{42, 1}));
}

TEST_F(JobRunnerTest, RetryAfterOverridesTheBackoff) {
  JobRunner runner = runner_with({{"ok", [](const Job&, std::stop_token) {
                                     return JobResult::retry("rate limited", Millis(1234));
                                   }}});
  const auto completion = runner.run(job_of("ok", 4), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kRetry);
  EXPECT_EQ(completion->error, "rate limited");
  EXPECT_EQ(completion->retry_delay, Millis(1234));  // not 8000, the backoff for attempt 4
}

// A service asking for a wait of centuries must not produce a delay the database cannot
// store (interval out of range): the handler's delay is capped like the backoff.
TEST_F(JobRunnerTest, HugeRetryAfterIsCappedAtMaxDelay) {
  JobRunner runner =
      runner_with({{"ok", [](const Job&, std::stop_token) {
                      return JobResult::retry("HTTP 503", Millis(9403122328289LL * 1000));
                    }}});
  const auto completion = runner.run(job_of("ok", 1), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kRetry);
  EXPECT_EQ(completion->retry_delay, exact_retry().max_delay);
}

TEST_F(JobRunnerTest, NegativeRetryAfterIsZero) {
  JobRunner runner = runner_with({{"ok", [](const Job&, std::stop_token) {
                                     return JobResult::retry("HTTP 503", Millis(-5000));
                                   }}});
  const auto completion = runner.run(job_of("ok", 1), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kRetry);
  EXPECT_EQ(completion->retry_delay, Millis(0));
}

TEST_F(JobRunnerTest, HandlerThatWroteItsOwnCompletionReturnsNothing) {
  JobRunner runner = runner_with({{"ok", [](const Job&, std::stop_token) {
                                     JobResult result = JobResult::done();
                                     result.completion_written = true;
                                     return result;
                                   }}});
  EXPECT_FALSE(runner.run(job_of("ok", 1), {}).has_value());
}

TEST_F(JobRunnerTest, StopTokenReachesTheHandler) {
  JobRunner runner =
      runner_with({{"ok", [](const Job&, std::stop_token stop) {
                      return stop.stop_requested() ? JobResult::released() : JobResult::done();
                    }}});
  JobStop stop;
  stop.request(StopCause::kDaemon);
  const auto completion = runner.run(job_of("ok", 1), stop);
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kReleased);
}

// handler.hpp's contract for a stop request (shutdown timeout, lost lease): the result is
// ignored and the job released. Before the runner checked the token, an in-process
// handler that threw when cancelled got a retry with its attempt counted, and on its last
// attempt the job went dead, for a job only interrupted by a restart.
TEST_F(JobRunnerTest, ResultOfAStoppedHandlerIsIgnoredAndTheJobReleased) {
  JobStop shutdown;
  JobRunner runner =
      runner_with({{"throws", [&shutdown](const Job&, std::stop_token) -> JobResult {
                      shutdown.request(StopCause::kDaemon);  // while the handler runs
                      throw std::runtime_error("cancelled");
                    }}});
  const auto completion = runner.run(job_of("throws", 5, 5), shutdown);
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kReleased);  // was dead before the fix
}

TEST_F(JobRunnerTest, DoneResultOfAStoppedHandlerStands) {
  JobStop shutdown;
  JobRunner runner = runner_with({{"ok", [&shutdown](const Job&, std::stop_token) {
                                     shutdown.request(StopCause::kDaemon);
                                     return JobResult::done();
                                   }}});
  const auto completion = runner.run(job_of("ok", 1), shutdown);
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kDone);
}

// Stopped because pgjobd_cancel asked: the job ends cancelled whatever the handler made of
// the stop (an exception here), never released or retried; a done result still stands.
TEST_F(JobRunnerTest, AJobStoppedForACancelEndsCancelledUnlessDone) {
  JobStop cancel;
  JobStop cancel_of_done;
  JobRunner runner = runner_with({{"throws",
                                   [&cancel](const Job&, std::stop_token) -> JobResult {
                                     cancel.request(StopCause::kCancelled);
                                     throw std::runtime_error("x");
                                   }},
                                  {"ok", [&cancel_of_done](const Job&, std::stop_token) {
                                     cancel_of_done.request(StopCause::kCancelled);
                                     return JobResult::done();
                                   }}});
  const auto cancelled = runner.run(job_of("throws", 1), cancel);
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->outcome, Outcome::kCancelled);
  const auto done = runner.run(job_of("ok", 1), cancel_of_done);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->outcome, Outcome::kDone);
}

// A job held for a thread (worker.prefetch) may be stopped before it starts: its lease
// lost, the daemon draining, or pgjobd_cancel. Its handler is never called; the job goes
// back to the queue, attempt not counted, or ends cancelled.
TEST_F(JobRunnerTest, AJobStoppedBeforeItStartsIsNotRun) {
  int calls = 0;
  JobRunner runner = runner_with({{"ok", [&calls](const Job&, std::stop_token) {
                                     ++calls;
                                     return JobResult::done();
                                   }}});
  JobStop lost_lease;
  lost_lease.request(StopCause::kDaemon);
  const auto released = runner.run(job_of("ok", 2), lost_lease);
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ(released->outcome, Outcome::kReleased);
  JobStop cancel;
  cancel.request(StopCause::kCancelled);
  const auto cancelled = runner.run(job_of("ok", 2), cancel);
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->outcome, Outcome::kCancelled);
  EXPECT_EQ(calls, 0);
}

// A cancel outranks a daemon stop whichever came first: the row's request makes the job
// end cancelled anyway, and the runner says so.
TEST(JobStopTest, ACancelOutranksADaemonStop) {
  JobStop daemon_first;
  daemon_first.request(StopCause::kDaemon);
  daemon_first.request(StopCause::kCancelled);
  EXPECT_EQ(daemon_first.cause(), StopCause::kCancelled);
  JobStop cancel_first;
  cancel_first.request(StopCause::kCancelled);
  cancel_first.request(StopCause::kDaemon);
  EXPECT_EQ(cancel_first.cause(), StopCause::kCancelled);
  EXPECT_TRUE(cancel_first.token().stop_requested());
  EXPECT_FALSE(JobStop().stop_requested());
}

TEST_F(JobRunnerTest, ReconfigureAppliesToTheNextJob) {
  JobRunner runner =
      runner_with({{"ok", [](const Job&, std::stop_token) { return JobResult::done(); }}});
  RetryConfig slower = exact_retry();
  slower.base = Millis(5000);
  runner.reconfigure(
      slower, {{"ok", [](const Job&, std::stop_token) { return JobResult::retry("now failing"); }}},
      65536);
  const auto completion = runner.run(job_of("ok", 1), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->outcome, Outcome::kRetry);
  EXPECT_EQ(completion->retry_delay, Millis(5000));
}

TEST_F(JobRunnerTest, OversizedPayloadEndsDeadWithoutCallingTheHandler) {
  int calls = 0;
  JobRunner runner = runner_with({{"ok", [&](const Job&, std::stop_token) {
                                     ++calls;
                                     return JobResult::done();
                                   }}});
  Job job = job_of("ok", 1);
  job.payload.clear();
  job.oversized_payload_bytes = 209715202;
  const auto completion = runner.run(job, {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(completion->outcome, Outcome::kDead);
  EXPECT_EQ(completion->error,
            "payload is 209715202 bytes of JSON text, over worker.max_payload_bytes: not run");
}

TEST_F(JobRunnerTest, AHandlersErrorTextIsBounded) {
  const std::string huge(1 << 20, 'e');
  JobRunner runner = runner_with(
      {{"throws", [&](const Job&, std::stop_token) { return JobResult::retry(huge); }}});
  const auto completion = runner.run(job_of("throws", 1), {});
  ASSERT_TRUE(completion.has_value());
  EXPECT_LE(completion->error.size(), JobRunner::kMaxErrorBytes + 40);
  EXPECT_EQ(completion->error.substr(0, 100), huge.substr(0, 100));
  EXPECT_NE(completion->error.find("truncated: 1048576 bytes in all"), std::string::npos);
}

// An in-process handler's value reaches the completion as storable, bounded JSON text.
TEST_F(JobRunnerTest, ADoneJobsValueBecomesItsStoredResult) {
  JobRunner runner = runner_with({{"ok",
                                   [](const Job& job, std::stop_token) {
                                     if (job.attempt == 1) return JobResult::done(R"({"rows": 3})");
                                     if (job.attempt == 2) return JobResult::done("not json");
                                     return JobResult::done(std::string(20, 'x'));
                                   }}},
                                 16);
  EXPECT_EQ(runner.run(job_of("ok", 1), {})->result, R"({"rows": 3})");
  EXPECT_EQ(runner.run(job_of("ok", 2), {})->result, R"("not json")");
  EXPECT_EQ(runner.run(job_of("ok", 3), {})->result,
            R"({"truncated": true, "bytes": 20, "head": "xxxxxxxxxxxxxxxx"})");
}

TEST_F(JobRunnerTest, OnlyADoneJobKeepsAResult) {
  JobRunner runner = runner_with({{"ok", [](const Job&, std::stop_token) {
                                     JobResult failed = JobResult::retry("no");
                                     failed.result = "1";
                                     return failed;
                                   }}});
  const auto completion = runner.run(job_of("ok", 1, 5), {});
  ASSERT_EQ(completion->outcome, Outcome::kRetry);
  EXPECT_EQ(completion->result, "");
}

// An AsyncHandler's job is handed over: start() returns at once, and the completion comes
// through the JobFinish when the handler's done is called (here later, from this thread),
// with what the settings of its start say (Retry-After capped at retry.max_delay); a job
// cancelled meanwhile ends cancelled. A sync run() of the same handler waits for it.
TEST_F(JobRunnerTest, AnAsyncHandlersJobIsHandedOverAndEndsThroughItsFinish) {
  std::vector<HandlerDone> dones;
  const Handler async = AsyncHandler([&dones](const Job&, std::stop_token, HandlerDone done) {
    dones.push_back(std::move(done));
  });
  JobRunner runner = runner_with({{"ok", async}});
  const Job job = job_of("ok", 2);
  EXPECT_TRUE(runner.hands_off(job));
  std::vector<std::optional<Completion>> finished;
  const JobFinish finish = [&finished](std::optional<Completion> completion) {
    finished.push_back(std::move(completion));
  };
  JobStop stop;
  const JobStarted started = runner.start(job, stop, finish);
  EXPECT_TRUE(started.handed_off);
  ASSERT_EQ(dones.size(), 1U);
  EXPECT_TRUE(finished.empty());
  dones[0](JobResult::retry("HTTP 503", Millis(3600000000)));
  ASSERT_EQ(finished.size(), 1U);
  ASSERT_TRUE(finished[0].has_value());
  EXPECT_EQ(finished[0]->outcome, Outcome::kRetry);
  EXPECT_EQ(finished[0]->retry_delay, Millis(600000));

  JobStop cancelled;
  EXPECT_TRUE(runner.start(job, cancelled, finish).handed_off);
  cancelled.request(StopCause::kCancelled);
  dones[1](JobResult::released());
  ASSERT_EQ(finished.size(), 2U);
  EXPECT_EQ(finished[1]->outcome, Outcome::kCancelled);

  // Without a JobFinish (run()): not handed over, but started and waited for.
  JobRunner sync =
      runner_with({{"ok", AsyncHandler([](const Job&, std::stop_token, HandlerDone done) {
                      done(JobResult::done());
                    })}});
  EXPECT_EQ(sync.run(job, {})->outcome, Outcome::kDone);
  EXPECT_FALSE(runner.hands_off(job_of("missing", 1)));
}

}  // namespace
}  // namespace pgjobd
