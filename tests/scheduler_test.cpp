// The scheduler over the fake store: it reconciles the YAML, sleeps until the next tick,
// fires each tick once however many daemons race, stops firing removed schedules, and
// survives database errors.
#include "schedule/scheduler.hpp"

#include <gtest/gtest.h>

#include <set>

#include "metrics/metrics.hpp"
#include "support/daemon_process.hpp"
#include "support/fake_schedule_store.hpp"
#include "support/log_capture.hpp"
#include "support/metrics_text.hpp"

namespace pgjobd::schedule {
namespace {

using pgjobd::testing::FakeScheduleStore;
using pgjobd::testing::FakeScheduleTable;
using std::chrono::milliseconds;
using Schedules = std::map<std::string, ScheduleConfig>;

ScheduleConfig every(int seconds, const std::string& misfire = "skip") {
  ScheduleConfig s;
  s.every = Millis(1000LL * seconds);
  s.type = "ping";
  s.misfire = misfire;
  return s;
}

// The fake reconciles at the real clock's time: the test's clock starts at the new rows'
// last_tick, where no tick is due yet.
WallClock::time_point reconciled_at(FakeScheduleTable& table) {
  return table.rows().at(0).last_tick;
}

struct Daemon {
  explicit Daemon(const std::shared_ptr<FakeScheduleTable>& table)
      : scheduler(std::make_unique<FakeScheduleStore>(table), nullptr, SchedulerSettings{}) {}
  Scheduler scheduler;
};

// Per-second schedules x and y, reconciled, with metrics: at t0 no tick is due yet.
struct MeteredPair {
  MeteredPair()
      : metrics({"default"}, {"ping"}),
        scheduler(std::make_unique<FakeScheduleStore>(table), &metrics, SchedulerSettings{}) {
    scheduler.set_yaml(Schedules{{"x", every(1)}, {"y", every(1)}});
    scheduler.run_once(WallClock::now());
    t0 = reconciled_at(*table);
  }
  double overdue() {
    return pgjobd::testing::metric_value(pgjobd::testing::scrape(metrics),
                                         "pgjobd_schedule_overdue_seconds")
        .value_or(-1);
  }
  std::shared_ptr<FakeScheduleTable> table = std::make_shared<FakeScheduleTable>();
  Metrics metrics;
  Scheduler scheduler;
  WallClock::time_point t0;
};

TEST(SchedulerTest, SleepsUntilTheNextTickAndFiresIt) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon daemon(table);
  daemon.scheduler.set_yaml(Schedules{{"beat", every(10)}});
  daemon.scheduler.run_once(WallClock::now());
  ASSERT_EQ(table->rows().size(), 1u);
  const WallClock::time_point t0 = reconciled_at(*table);
  const WallClock::time_point wake = daemon.scheduler.run_once(t0);
  const TickTime first(
      std::chrono::floor<Seconds>(t0).time_since_epoch() / Seconds(10) * Seconds(10) + Seconds(10));
  EXPECT_EQ(wake, WallClock::time_point(first));
  EXPECT_TRUE(table->jobs().empty());
  daemon.scheduler.run_once(wake);
  ASSERT_EQ(table->jobs().size(), 1u);
  EXPECT_EQ(table->jobs()[0].tick, first);
  EXPECT_FALSE(table->jobs()[0].late);
}

TEST(SchedulerTest, ThreeDaemonsRacingEveryTickCreateExactlyOneJobPerTick) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon a(table);
  Daemon b(table);
  Daemon c(table);
  for (Daemon* d : {&a, &b, &c}) d->scheduler.set_yaml(Schedules{{"beat", every(1)}});
  a.scheduler.run_once(WallClock::now());
  const WallClock::time_point t0 = reconciled_at(*table);
  for (Daemon* d : {&b, &c}) d->scheduler.run_once(t0);
  for (int s = 1; s <= 30; ++s) {
    // Each daemon wakes in turn at the tick, some a little late.
    const WallClock::time_point t = t0 + Seconds(s);
    a.scheduler.run_once(t);
    b.scheduler.run_once(t + milliseconds(3));
    c.scheduler.run_once(t + milliseconds(700));
  }
  std::set<TickTime> ticks;
  for (const auto& job : table->jobs()) {
    EXPECT_TRUE(ticks.insert(job.tick).second) << "tick fired twice";
  }
  ASSERT_EQ(ticks.size(), 30u);
  EXPECT_EQ(*ticks.rbegin() - *ticks.begin(), Seconds(29));  // no gap
}

TEST(SchedulerTest, ARemovedScheduleStopsFiring) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon daemon(table);
  daemon.scheduler.set_yaml(Schedules{{"beat", every(1)}, {"other", every(1)}});
  daemon.scheduler.run_once(WallClock::now());
  const WallClock::time_point t0 = reconciled_at(*table);
  daemon.scheduler.run_once(t0 + Seconds(1));
  EXPECT_EQ(table->jobs().size(), 2u);
  daemon.scheduler.set_yaml(Schedules{{"other", every(1)}});
  daemon.scheduler.run_once(t0 + Seconds(2));
  daemon.scheduler.run_once(t0 + Seconds(3));
  int beats = 0;
  for (const auto& job : table->jobs()) beats += job.schedule == "beat" ? 1 : 0;
  EXPECT_EQ(beats, 1);
  EXPECT_EQ(table->jobs().size(), 4u);
}

TEST(SchedulerTest, ADatabaseErrorWaitsAndTheNextPassCatchesUpByPolicy) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon daemon(table);
  daemon.scheduler.set_yaml(Schedules{{"skip", every(1)}, {"all", every(1, "all")}});
  daemon.scheduler.run_once(WallClock::now());
  const WallClock::time_point t0 = reconciled_at(*table);
  table->set_failing(true);
  const WallClock::time_point failed_at = t0 + Seconds(1);
  EXPECT_EQ(daemon.scheduler.run_once(failed_at), failed_at + SchedulerSettings{}.retry);
  table->set_failing(false);
  daemon.scheduler.run_once(t0 + Seconds(4));
  int skip = 0;
  int all = 0;
  for (const auto& job : table->jobs()) (job.schedule == "all" ? all : skip) += 1;
  EXPECT_EQ(skip, 1);  // the latest of the 4 due ticks
  EXPECT_EQ(all, 4);
}

// Another session holds x's row (an operator's open transaction around
// pgjobd_schedule_pause('x')): y keeps firing every tick, x's lateness shows in the overdue
// gauge, the wait is logged once with the holder, no pass spins, and x fires once free.
TEST(SchedulerTest, AHeldRowHoldsBackOnlyItsScheduleWhichShowsOverdueUntilItFires) {
  MeteredPair pair;
  const auto& table = pair.table;
  Scheduler& scheduler = pair.scheduler;
  const WallClock::time_point t0 = pair.t0;
  const auto jobs_of = [&](const std::string& name) {
    int n = 0;
    for (const auto& job : table->jobs()) n += job.schedule == name;
    return n;
  };
  const auto overdue = [&] { return pair.overdue(); };
  pgjobd::testing::LogCapture log;
  table->set_held("x", true);
  for (int i = 1; i <= 5; ++i) {
    const WallClock::time_point now = t0 + Seconds(i);
    const WallClock::time_point next = scheduler.run_once(now);
    EXPECT_GT(next, now) << "a pass that spins on the held row";
    EXPECT_LE(next, now + SchedulerSettings{}.held_retry);
  }
  EXPECT_EQ(jobs_of("y"), 5);
  EXPECT_EQ(jobs_of("x"), 0);
  EXPECT_EQ(overdue(), 4) << "x's first tick (t0 + 1 s) at t0 + 5 s";
  EXPECT_EQ(log.count("schedule x: tick"), 1) << log.all();
  EXPECT_TRUE(log.contains("locked by another session (pid 4242)")) << log.all();

  table->set_held("x", false);
  scheduler.run_once(t0 + Seconds(6));
  EXPECT_EQ(jobs_of("x"), 1) << "the latest due tick (misfire: skip)";
  EXPECT_EQ(jobs_of("y"), 6);
  EXPECT_EQ(overdue(), 5) << "what the pass found: x's tick t0 + 1 s at t0 + 6 s";
  scheduler.run_once(t0 + Seconds(7));
  EXPECT_EQ(overdue(), 0) << "x is on time again";
  EXPECT_TRUE(log.contains("schedule x: its row is free again")) << log.all();
}

// A scheduler that cannot keep up (a pass every 3 s for per-second schedules) fires the
// latest tick each pass and misses the others (misfire: skip): each pass is on time by its
// own measure, but the gauge counts from the first missed tick until a pass fires with none
// missed, so an overload shows as growing lateness, not as 0.
TEST(SchedulerTest, MissingTicksOnEveryPassShowsAsGrowingOverdueUntilOnTimeAgain) {
  MeteredPair pair;
  const auto& table = pair.table;
  Scheduler& scheduler = pair.scheduler;
  const WallClock::time_point t0 = pair.t0;
  const auto overdue = [&] { return pair.overdue(); };
  for (int pass = 1; pass <= 4; ++pass) scheduler.run_once(t0 + Seconds(3 * pass));
  EXPECT_EQ(table->jobs().size(), 8u) << "one tick per schedule per pass";
  EXPECT_EQ(overdue(), 11) << "from the first missed tick, t0 + 1 s, to the pass at t0 + 12 s";
  scheduler.run_once(t0 + Seconds(13));  // on time: no tick missed
  EXPECT_EQ(overdue(), 0);
  EXPECT_EQ(table->jobs().size(), 10u);
}

// A reload whose YAML changes a held row: the reconciliation gives up (the store's lock
// wait), the table's schedules keep firing, and the YAML is applied once the row is free.
TEST(SchedulerTest, AReloadThatMustChangeAHeldRowKeepsTheOthersFiringAndAppliesLater) {
  auto table = std::make_shared<FakeScheduleTable>();
  Scheduler scheduler(std::make_unique<FakeScheduleStore>(table), nullptr, SchedulerSettings{});
  scheduler.set_yaml(Schedules{{"x", every(1)}, {"y", every(1)}});
  scheduler.run_once(WallClock::now());
  const WallClock::time_point t0 = reconciled_at(*table);
  pgjobd::testing::LogCapture log;
  table->set_held("x", true);
  scheduler.set_yaml(Schedules{{"x", every(2)}, {"y", every(1)}});
  for (int i = 1; i <= 3; ++i) {
    const WallClock::time_point now = t0 + Seconds(i);
    const WallClock::time_point next = scheduler.run_once(now);
    EXPECT_GT(next, now);
    EXPECT_LE(next, now + SchedulerSettings{}.held_retry);
  }
  int y = 0;
  for (const auto& job : table->jobs()) y += job.schedule == "y";
  EXPECT_EQ(y, 3) << "y stopped firing behind the held reconciliation";
  EXPECT_EQ(log.count("schedules from the config: not applied yet"), 1) << log.all();
  table->set_held("x", false);
  scheduler.run_once(t0 + Seconds(4));
  EXPECT_EQ(table->rows().at(0).timing.every_seconds, 2) << log.all();
}

// README "Recurring jobs": only a daemon whose config has a `schedules:` section reconciles
// the table's YAML schedules; one without it (a worker-only host, an old config) leaves
// them and fires them. Before, the engine passed an empty section for an absent one, and
// the daemon logged "0 added, 0 changed, 3 removed".
TEST(SchedulerTest, ADaemonWithoutTheSectionLeavesTheYamlSchedulesAndFiresThem) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon writer(table);
  writer.scheduler.set_yaml(Schedules{{"a", every(1)}, {"b", every(1)}, {"c", every(1)}});
  writer.scheduler.run_once(WallClock::now());
  const WallClock::time_point t0 = reconciled_at(*table);
  pgjobd::testing::LogCapture log;
  Daemon worker(table);
  worker.scheduler.set_yaml(std::nullopt);
  worker.scheduler.run_once(t0 + Seconds(1));
  EXPECT_EQ(table->rows().size(), 3u) << log.all();
  EXPECT_EQ(table->jobs().size(), 3u) << "the worker fires the table's schedules";
  EXPECT_FALSE(log.contains("removed")) << log.all();
  EXPECT_FALSE(log.contains("differs")) << log.all();
}

TEST(SchedulerTest, AnEmptySectionRemovesEveryYamlSchedule) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon daemon(table);
  daemon.scheduler.set_yaml(Schedules{{"a", every(1)}, {"b", every(1)}});
  daemon.scheduler.run_once(WallClock::now());
  ASSERT_EQ(table->rows().size(), 2u);
  daemon.scheduler.set_yaml(Schedules{});
  daemon.scheduler.run_once(reconciled_at(*table));
  EXPECT_TRUE(table->rows().empty());
}

// A reload that removes the key stops reconciling: the schedules stay as the last
// reconciliation left them, and a reload that brings the key back reconciles again.
TEST(SchedulerTest, AReloadWithoutTheSectionLeavesTheTableAndStopsComparingWithIt) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon a(table);
  Daemon b(table);
  a.scheduler.set_yaml(Schedules{{"x", every(1)}});
  a.scheduler.run_once(WallClock::now());
  const WallClock::time_point t0 = reconciled_at(*table);
  pgjobd::testing::LogCapture log;
  a.scheduler.set_yaml(std::nullopt);
  a.scheduler.run_once(t0);
  EXPECT_EQ(table->rows().size(), 1u);
  EXPECT_TRUE(log.contains("no schedules: section any more")) << log.all();
  b.scheduler.set_yaml(Schedules{{"y", every(1)}});
  b.scheduler.run_once(t0);
  a.scheduler.run_once(t0 + SchedulerSettings{}.refresh);  // reads the table again
  EXPECT_FALSE(log.contains("differs")) << "a has no section to differ: " << log.all();
  a.scheduler.set_yaml(Schedules{{"x", every(1)}});
  a.scheduler.run_once(t0 + SchedulerSettings{}.refresh);
  ASSERT_EQ(table->rows().size(), 1u);
  EXPECT_EQ(table->rows()[0].name, "x");
}

// Two daemons with different sections: the one whose section the table no longer matches
// says so at its next read of the table, once per difference, and again only for a new one.
TEST(SchedulerTest, ADaemonWhoseSectionAnotherDaemonOverwroteWarnsOncePerDifference) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon a(table);
  Daemon b(table);
  a.scheduler.set_yaml(Schedules{{"x", every(1)}, {"y", every(1)}});
  a.scheduler.run_once(WallClock::now());
  const WallClock::time_point t0 = reconciled_at(*table);
  pgjobd::testing::LogCapture log;
  ScheduleConfig x_elsewhere = every(1);
  x_elsewhere.payload = R"({"from": "b"})";
  b.scheduler.set_yaml(Schedules{{"x", x_elsewhere}, {"z", every(1)}});
  b.scheduler.run_once(t0);
  EXPECT_FALSE(log.contains("differs")) << "b's own reconciliation: " << log.all();
  const Millis refresh = SchedulerSettings{}.refresh;
  a.scheduler.run_once(t0 + refresh);
  a.scheduler.run_once(t0 + 2 * refresh);
  EXPECT_EQ(log.count("differs from this one's"), 3) << log.all();
  EXPECT_EQ(log.count("schedule x has another definition"), 1) << log.all();
  EXPECT_EQ(log.count("schedule y of this daemon's section is not in the table"), 1) << log.all();
  EXPECT_EQ(log.count("schedule z is in the table but not in this daemon's section"), 1)
      << log.all();
  // The same section again: no difference, and a later one is said again.
  b.scheduler.set_yaml(Schedules{{"x", every(1)}, {"y", every(1)}});
  b.scheduler.run_once(t0 + 2 * refresh);
  a.scheduler.run_once(t0 + 3 * refresh);
  EXPECT_EQ(log.count("differs from this one's"), 3) << log.all();
  b.scheduler.set_yaml(Schedules{{"x", every(1)}});
  b.scheduler.run_once(t0 + 3 * refresh);
  a.scheduler.run_once(t0 + 4 * refresh);
  EXPECT_EQ(log.count("schedule y of this daemon's section is not in the table"), 2) << log.all();
}

TEST(SchedulerTest, AnIdleDaemonWithAHundredSchedulesReadsTheTableOncePerRefresh) {
  auto table = std::make_shared<FakeScheduleTable>();
  Daemon daemon(table);
  std::map<std::string, ScheduleConfig> yaml;
  for (int i = 0; i < 100; ++i) {
    ScheduleConfig rare;
    rare.cron = "0 0 29 2 *";  // no tick within the simulated hour
    rare.type = "report";
    yaml["rare" + std::to_string(i)] = rare;
  }
  daemon.scheduler.set_yaml(yaml);
  WallClock::time_point now = daemon.scheduler.run_once(WallClock::now());  // reconcile, load
  const int calls = table->calls();
  // A simulated idle hour: each pass is one load, one per refresh.
  const WallClock::time_point end = now + std::chrono::hours(1);
  int passes = 0;
  while (now < end) {
    const WallClock::time_point next = daemon.scheduler.run_once(now);
    ASSERT_GT(next, now);
    now = next;
    ++passes;
  }
  const double per_second = (table->calls() - calls) / 3600.0;
  EXPECT_LE(per_second, 0.5);
  EXPECT_EQ(table->calls() - calls, passes);
}

}  // namespace
}  // namespace pgjobd::schedule
