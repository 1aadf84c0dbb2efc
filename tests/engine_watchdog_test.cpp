// The watchdog's view of the engine (Engine::responsive, fed to systemd's WATCHDOG=1 pings)
// over the fake database: a pool saturated by jobs that outlast the watchdog limit is
// alive, a claim that hangs is not. The intervals are shortened through EngineTimings
// (slack 100 ms, progress slice 20 ms instead of 60 s and 1 s); the logic is production's.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "engine/engine_factory.hpp"
#include "pgjobd/engine.hpp"
#include "support/fake_job_store.hpp"
#include "support/job_gate.hpp"
#include "support/notify_sink.hpp"
#include "support/wait_until.hpp"
#include "systemd/sd_notify.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::JobGate;
using pgjobd::testing::NotifySink;
using pgjobd::testing::ScopedEnv;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr Millis kMaxInterval{50};
constexpr Millis kSlack{100};
// responsive() turns false once the claim loop has not progressed for this long.
constexpr Millis kLimit = kMaxInterval + kSlack;

Config watchdog_config(int concurrency) {
  Config config;
  config.metrics.listen = "";  // no HTTP endpoint
  config.worker.concurrency = concurrency;
  config.poll.min_interval = Millis(10);
  config.poll.max_interval = kMaxInterval;
  config.poll.listen_notify = false;
  return config;
}

EngineTimings short_timings() {
  EngineTimings timings;
  timings.watchdog_slack = kSlack;
  timings.progress_slice = Millis(20);
  return timings;
}

class EngineWatchdogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    table_.unblock_all();
    gate_.release_all();
    if (engine_) engine_->drain();
  }

  Engine& start_engine(const Config& config) {
    engine_.emplace(make_engine(config, database_, short_timings()));
    engine_->register_handler(
        "gated", [this](const Job& job, std::stop_token stop) { return gate_.run(job, stop); });
    engine_->start();
    return *engine_;
  }

  // Samples responsive() for `window`; the longest run of false answers is returned
  // (zero: it never reported the engine wedged).
  static milliseconds unresponsive_for(const Engine& engine, milliseconds window) {
    const auto end = Clock::now() + window;
    std::optional<Clock::time_point> since;
    milliseconds longest{0};
    while (Clock::now() < end) {
      const auto now = Clock::now();
      if (engine.responsive()) {
        since.reset();
      } else {
        if (!since) since = now;
        longest = std::max(
            longest, std::chrono::duration_cast<milliseconds>(now - *since) + milliseconds(1));
      }
      // A sampling period: the test observes a span of time, it awaits no event.
      std::this_thread::sleep_for(milliseconds(2));
    }
    return longest;
  }

  const std::shared_ptr<FakeDatabase> database_ = std::make_shared<FakeDatabase>();
  FakeJobTable& table_ = database_->table();
  JobGate gate_;
  std::optional<Engine> engine_;  // last: drained before the gate goes away
};

// Every slot busy with a job that runs ten watchdog limits: the claim loop claims nothing
// (no claim returns to mark progress), yet it waits in slices and stays responsive. With
// the production slice (1 s) against this limit (150 ms) the test fails.
TEST_F(EngineWatchdogTest, StaysResponsiveWhileEverySlotRunsAJobLongerThanTheLimit) {
  table_.add_jobs(3, "gated");
  const Engine& engine = start_engine(watchdog_config(2));
  ASSERT_TRUE(gate_.wait_started(2));
  const int claims = table_.calls(StoreMethod::kClaim);

  EXPECT_EQ(unresponsive_for(engine, kLimit * 10), milliseconds(0));
  EXPECT_EQ(gate_.running(), 2);  // both jobs ran through the whole window
  EXPECT_EQ(gate_.finished(), 0);
  EXPECT_EQ(table_.calls(StoreMethod::kClaim), claims);  // the pool was full all along
}

// A claim that does not return (a wedged connection) is what the watchdog is for: once it
// has hung for the limit the engine is unresponsive, and it recovers when the claim does.
TEST_F(EngineWatchdogTest, ReportsUnresponsiveWhileAClaimHangs) {
  table_.block(StoreMethod::kClaim);
  const Engine& engine = start_engine(watchdog_config(2));
  ASSERT_TRUE(table_.wait_held(StoreMethod::kClaim));
  ASSERT_TRUE(wait_until([&] { return !engine.responsive(); }, seconds(20)));
  // Not before the limit: the last progress was marked just before the claim started.
  EXPECT_GE(Clock::now() - table_.call_times(StoreMethod::kClaim).front(),
            kLimit - milliseconds(5));
  EXPECT_FALSE(engine.responsive());  // and it stays so while the claim hangs

  table_.unblock(StoreMethod::kClaim);
  EXPECT_TRUE(wait_until([&] { return engine.responsive(); }, seconds(20)));
}

// The same through the real ping path: SystemdNotifier pings every 50 ms while
// responsive() holds, keeps pinging through a saturated pool, stops while a claim hangs
// (systemd would restart the daemon) and resumes after.
TEST_F(EngineWatchdogTest, SystemdPingsThroughASaturatedPoolAndStopsWhileAClaimHangs) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "100000"},
                {"WATCHDOG_PID", std::nullopt}};
  const auto job = table_.add_job("gated");
  const Engine& engine = start_engine(watchdog_config(1));
  ASSERT_TRUE(gate_.wait_started(1));

  SystemdNotifier notifier;
  ASSERT_EQ(notifier.watchdog_interval(), milliseconds(50));
  std::atomic<int> unhealthy_checks{0};
  notifier.start_watchdog([&] {
    const bool healthy = engine.responsive();
    if (!healthy) ++unhealthy_checks;
    return healthy;
  });

  // Ten watchdog limits with the only slot busy: a ping at least every few intervals.
  const auto window_end = Clock::now() + kLimit * 10;
  auto last_ping = Clock::now();
  milliseconds longest_gap{0};
  int pings = 0;
  while (Clock::now() < window_end) {
    const auto datagram = sink.receive(milliseconds(20));
    if (!datagram) continue;
    EXPECT_EQ(datagram->text, "WATCHDOG=1");
    const auto now = Clock::now();
    longest_gap = std::max(longest_gap, std::chrono::duration_cast<milliseconds>(now - last_ping));
    last_ping = now;
    ++pings;
  }
  EXPECT_GE(pings, 10);
  EXPECT_LT(longest_gap, kLimit * 2);
  EXPECT_EQ(unhealthy_checks.load(), 0);
  EXPECT_EQ(gate_.running(), 1);

  // The job finishes; the claim for the freed slot hangs.
  table_.block(StoreMethod::kClaim);
  gate_.release(job);
  ASSERT_TRUE(table_.wait_held(StoreMethod::kClaim));
  // Once a check has seen it unresponsive, every ping from earlier checks has been sent:
  // after draining those the socket stays silent (six intervals).
  ASSERT_TRUE(wait_until([&] { return unhealthy_checks.load() > 0; }, seconds(20)));
  sink.drain();
  EXPECT_FALSE(sink.receive(milliseconds(300)));

  table_.unblock(StoreMethod::kClaim);
  EXPECT_EQ(sink.receive_text(milliseconds(5000)), "WATCHDOG=1");
  notifier.stop_watchdog();
}

}  // namespace
}  // namespace pgjobd
