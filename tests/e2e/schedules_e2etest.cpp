// End-to-end: recurring jobs with real daemons. Three daemons firing a 1-second schedule
// create exactly one job per tick, with no gap, also when one of them is SIGKILLed; after
// every daemon was stopped across ticks, each misfire policy does exactly what it says.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using WallClock = std::chrono::system_clock;

// The ticks (seconds since the epoch) of the jobs schedule `name` created, in order. Read
// from the unique_key ('schedule:NAME:2026-12-01T13:06:43Z'), not from run_at: a rescue
// (a job whose daemon was killed) sets run_at anew.
std::vector<std::int64_t> ticks_of(TestSchema& schema, const std::string& name) {
  const std::string list = schema.query(
      "SELECT string_agg(extract(epoch FROM t)::bigint::text, ' ' ORDER BY t) "
      "FROM (SELECT regexp_replace(unique_key, '^schedule:[^:]*:', '')::timestamptz AS t "
      "FROM {jobs} WHERE unique_key LIKE 'schedule:" +
      name + ":%') ticks");
  std::vector<std::int64_t> ticks;
  std::istringstream words(list);
  for (std::int64_t t = 0; words >> t;) ticks.push_back(t);
  return ticks;
}

std::int64_t count_of(TestSchema& schema, const std::string& name, const std::string& where) {
  return schema.count("unique_key LIKE 'schedule:" + name + ":%' AND " + where);
}

std::int64_t last_tick(TestSchema& schema, const std::string& name) {
  const std::string text =
      schema.query("SELECT extract(epoch FROM last_tick)::bigint FROM \"" + schema.name() +
                   "\".pgjobd_schedules WHERE name = '" + name + "'");
  return text.empty() ? 0 : std::stoll(text);
}

std::int64_t wall_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(WallClock::now().time_since_epoch())
      .count();
}

// Ticks that appear twice, and missing ticks between the first and the last.
void expect_each_tick_once(const std::vector<std::int64_t>& ticks) {
  ASSERT_FALSE(ticks.empty());
  for (std::size_t i = 1; i < ticks.size(); ++i) {
    EXPECT_EQ(ticks[i] - ticks[i - 1], 1)
        << "after tick " << ticks[i - 1]
        << (ticks[i] == ticks[i - 1] ? ": a duplicate" : ": a gap");
  }
}

TEST(SchedulesE2E, ThreeDaemonsCreateOneJobPerTickAndAKilledOneLeavesNoDuplicate) {
  TestSchema schema;
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (int i = 0; i < 3; ++i) {
    DaemonYaml yaml(schema.name());
    // The kill below follows a tick closely, so it can catch the killed daemon running that
    // tick's job: a short lease lets the survivors rescue and run it within the test.
    yaml.handler("ping", "{builtin: noop}")
        .set("schedules", "{beat: {every: 1s, type: ping}}")
        .set("lease", "{duration: 2s}");
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
  }
  for (auto& daemon : daemons) ASSERT_TRUE(daemon->wait_ready()) << daemon->log();
  ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "beat").size() >= 15; }, 30s));
  // The first daemon started is the maintenance leader; the others fire on as before.
  daemons[0]->signal(SIGKILL);
  ASSERT_TRUE(daemons[0]->wait_for_exit(5s).has_value());
  ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "beat").size() >= 30; }, 30s));
  // A job the killed daemon was running comes back once its lease expired and a survivor
  // leads: up to three of the dead leader's idle intervals (15 s, README "Rescue"), a try,
  // then the retry's backoff, which may be after the 30th tick. Awaited, not assumed.
  ASSERT_TRUE(wait_until(
      [&] {
        return schema.count("status <> 'done' AND created_at < now() - interval '1 second'") == 0;
      },
      60s))
      << table_summary(schema);
  // A tick fired just before the daemons stop may find no daemon left to run its job.
  const std::string stopped_at = schema.query("SELECT now()");
  for (std::size_t i = 1; i < daemons.size(); ++i) stop_daemon(*daemons[i]);

  const std::vector<std::int64_t> ticks = ticks_of(schema, "beat");
  EXPECT_GE(ticks.size(), 30u);
  expect_each_tick_once(ticks);
  EXPECT_EQ(schema.query("SELECT count(DISTINCT unique_key) = count(*) FROM {jobs}"), "t");
  EXPECT_EQ(last_tick(schema, "beat"), ticks.back());
  // Each tick's job ran (noop) once, but those fired in the last second before the stop.
  EXPECT_EQ(schema.count("status <> 'done' AND created_at < '" + stopped_at +
                         "'::timestamptz - interval '1 second'"),
            0)
      << table_summary(schema);
}

TEST(SchedulesE2E, AfterEveryDaemonWasDownEachMisfirePolicyHoldsExactly) {
  TestSchema schema;
  // One tick of the c_* schedules falls while every daemon is down, 10 s before they start
  // again: late (more than 5 s), within an hour's grace, beyond a 5 s one.
  const std::int64_t tick = wall_seconds() + 8;
  const std::int64_t second = tick % 60;
  const std::int64_t minute = tick / 60 % 60;
  const std::string cron =
      yaml_quote(std::to_string(second) + " " + std::to_string(minute) + " * * * *");
  const std::string schedules =
      "{c_skip: {cron: " + cron + ", type: ping, misfire: skip}, " +
      "c_skip_short: {cron: " + cron + ", type: ping, misfire: skip, misfire_grace: 5s}, " +
      "c_all: {cron: " + cron + ", type: ping, misfire: all}, " + "c_none: {cron: " + cron +
      ", type: ping, misfire: none}, " + "e_skip: {every: 1s, type: ping, misfire: skip}, " +
      "e_all: {every: 1s, type: ping, misfire: all}, " +
      "e_none: {every: 1s, type: ping, misfire: none}}";
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}").set("schedules", schedules);
  {
    DaemonProcess a(yaml.text());
    DaemonProcess b(yaml.text());
    ASSERT_TRUE(a.wait_ready()) << a.log();
    ASSERT_TRUE(b.wait_ready()) << b.log();
    ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "e_all").size() >= 2; }, 10s));
    stop_daemon(a);
    stop_daemon(b);
  }
  const std::int64_t stopped = wall_seconds();
  ASSERT_LT(stopped, tick - 1) << "the daemons took too long to stop: the test needs them "
                                  "down before the tick";
  const std::vector<std::int64_t> before_all = ticks_of(schema, "e_all");
  const std::int64_t down_from = last_tick(schema, "e_all");
  // The outage itself is what is tested: every daemon stays down until 10 s after the tick.
  std::this_thread::sleep_until(WallClock::time_point(std::chrono::seconds(tick + 10)));
  const std::int64_t restarted = wall_seconds();
  DaemonProcess a(yaml.text());
  DaemonProcess b(yaml.text());
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ASSERT_TRUE(b.wait_ready()) << b.log();
  ASSERT_TRUE(wait_until(
      [&] {
        for (const char* name : {"c_skip", "c_skip_short", "c_all", "c_none"}) {
          if (last_tick(schema, name) < tick) return false;
        }
        return last_tick(schema, "e_all") >= restarted + 3;
      },
      20s));
  stop_daemon(a);
  stop_daemon(b);

  // The tick missed while down: skip fires it once, late (within its grace); skip with a
  // shorter grace and none do not; all fires it, late.
  EXPECT_EQ(ticks_of(schema, "c_skip"), std::vector<std::int64_t>{tick});
  EXPECT_EQ(count_of(schema, "c_skip", "payload->'_schedule'->>'late' = 'true'"), 1);
  EXPECT_TRUE(ticks_of(schema, "c_skip_short").empty());
  EXPECT_EQ(ticks_of(schema, "c_all"), std::vector<std::int64_t>{tick});
  EXPECT_EQ(count_of(schema, "c_all", "payload->'_schedule'->>'late' = 'true'"), 1);
  EXPECT_TRUE(ticks_of(schema, "c_none").empty());

  // Per second: all fires every tick of the outage, late, and none twice.
  const std::vector<std::int64_t> all = ticks_of(schema, "e_all");
  expect_each_tick_once(all);
  EXPECT_EQ(all.front(), before_all.front());
  EXPECT_GE(count_of(schema, "e_all", "payload->'_schedule'->>'late' = 'true'"),
            restarted - down_from - 6);
  // skip and none: nothing between the outage's start and the restart but the one tick that
  // was current (on time) when the first daemon came back.
  for (const char* name : {"e_skip", "e_none"}) {
    SCOPED_TRACE(name);
    const std::vector<std::int64_t> ticks = ticks_of(schema, name);
    int in_outage = 0;
    for (const std::int64_t t : ticks) in_outage += t > stopped + 1 && t < restarted ? 1 : 0;
    EXPECT_EQ(in_outage, 0);
    EXPECT_EQ(count_of(schema, name, "payload->'_schedule'->>'late' = 'true'"), 0);
    EXPECT_EQ(schema.query("SELECT count(DISTINCT unique_key) = count(*) FROM {jobs}"), "t");
  }
}

}  // namespace
}  // namespace pgjobd::testing

namespace pgjobd::testing {
namespace {

TEST(SchedulesE2E, TheCliPrintsTheNextTicksAndListsEverySchedule) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}")
      .set("schedules",
           "{nightly: {cron: \"30 2 * * *\", timezone: Europe/Berlin, type: report}, "
           "beat: {every: 1h, type: ping}}");
  TempDir dir;
  const std::string file = dir.write("pgjobd.yaml", yaml.text());
  // From the config alone: a cron line can be checked before any daemon runs it.
  const CliResult next = run_cli(
      {"schedules", "-c", file, "--next", "3", "nightly", "--from", "2027-03-27T00:00:00Z"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(next.out,
            "2027-03-27T01:30:00Z  2027-03-27 02:30:00 CET\n"
            "2027-03-28T01:00:00Z  2027-03-28 03:00:00 CEST\n"
            "2027-03-29T00:30:00Z  2027-03-29 02:30:00 CEST\n");
  EXPECT_EQ(run_cli({"schedules", "-c", file, "--next", "3"}).exit_code, 2);  // NAME missing

  schema.exec("SELECT \"" + schema.name() +
              "\".pgjobd_schedule_upsert('app', 'ping', cron => '0 0 * * *')");
  {
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_for_log("schedules from the config: 2 added")) << daemon.log();
    stop_daemon(daemon);
  }
  const CliResult list = run_cli({"schedules", "-c", file});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  for (const char* text :
       {"app (sql, active): cron \"0 0 * * *\" UTC, type ping, queue default\n",
        "beat (yaml, active): every 1h, type ping, queue default\n",
        "nightly (yaml, active): cron \"30 2 * * *\" Europe/Berlin, type report, queue default\n",
        "  last tick: ", "  next tick: ", " CET)\n"}) {
    EXPECT_NE(list.out.find(text), std::string::npos) << text << " not in:\n" << list.out;
  }
  const CliResult unknown = run_cli({"schedules", "-c", file, "--next", "1", "nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no schedule nope"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace pgjobd::testing

namespace pgjobd::testing {
namespace {

TEST(SchedulesE2E, SighupAddsChangesAndRemovesScheduleAndARemovedOneStopsFiring) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}")
      .set("schedules", "{old: {every: 1s, type: ping}, kept: {every: 1h, type: ping}}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "old").size() >= 2; }, 10s));

  yaml.set("schedules", "{new: {every: 1s, type: ping}, kept: {every: 1h, type: other}}");
  {
    std::ofstream out(daemon.config_path(), std::ios::trunc);
    out << yaml.text();
  }
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_for_log("schedules from the config: 1 added, 1 changed, 1 removed"))
      << daemon.log();
  ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "new").size() >= 2; }, 10s));
  // "old" is gone from the table, and its last job is older than the new one's first two.
  EXPECT_EQ(schema.query("SELECT string_agg(name || ':' || type, ',' ORDER BY name) FROM \"" +
                         schema.name() + "\".pgjobd_schedules"),
            "kept:other,new:ping");
  const std::vector<std::int64_t> old_ticks = ticks_of(schema, "old");
  const std::vector<std::int64_t> new_ticks = ticks_of(schema, "new");
  EXPECT_LT(old_ticks.back(), new_ticks[1]);
  stop_daemon(daemon);
  EXPECT_EQ(ticks_of(schema, "old"), old_ticks);
}

// README "Recurring jobs": a daemon whose config has no `schedules:` key (a worker-only
// host, an old config) leaves the YAML schedules in the table and fires them; only
// `schedules: {}` removes them all. Before, the daemon without the key logged "schedules
// from the config: 0 added, 0 changed, 3 removed" and the three were gone.
TEST(SchedulesE2E, ADaemonWithoutTheSectionKeepsTheYamlSchedulesAndAnEmptyOneRemovesThem) {
  TestSchema schema;
  const std::string table = schema.qualified("pgjobd_schedules");
  DaemonYaml with(schema.name());
  with.handler("ping", "{builtin: noop}")
      .set("schedules",
           "{nightly_report: {cron: \"30 2 * * *\", type: ping}, heartbeat: {every: 30s, type: "
           "ping}, fast: {every: 1s, type: ping}}");
  {
    DaemonProcess writer(with.text());
    ASSERT_TRUE(writer.wait_ready()) << writer.log();
    ASSERT_TRUE(writer.wait_for_log("schedules from the config: 3 added")) << writer.log();
    stop_daemon(writer);
  }
  DaemonYaml without(schema.name());
  without.handler("ping", "{builtin: noop}");
  {
    DaemonProcess worker(without.text());
    ASSERT_TRUE(worker.wait_ready()) << worker.log();
    const std::size_t fired = ticks_of(schema, "fast").size();
    ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "fast").size() >= fired + 2; }, 10s))
        << "the daemon without the section fires the table's schedules\n"
        << worker.log();
    EXPECT_EQ(schema.query("SELECT count(*) FROM " + table + " WHERE source = 'yaml'"), "3");
    stop_daemon(worker);
    EXPECT_EQ(worker.log().find("schedules from the config"), std::string::npos) << worker.log();
  }
  DaemonYaml empty(schema.name());
  empty.handler("ping", "{builtin: noop}").set("schedules", "{}");
  DaemonProcess emptied(empty.text());
  ASSERT_TRUE(emptied.wait_ready()) << emptied.log();
  EXPECT_TRUE(emptied.wait_for_log("schedules from the config: 0 added, 0 changed, 3 removed"))
      << emptied.log();
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + table), "0");
  stop_daemon(emptied);
}

// An operator's open transaction around pgjobd_schedule_pause('x') holds x's row: y keeps
// firing every second, the overdue gauge shows x late, the log names the holder's pid, and
// once the transaction rolls back x fires again. The holder's session is ended by the
// server after 40 s idle in its transaction, whatever the daemon does.
TEST(SchedulesE2E, AnOpenTransactionOnOneSchedulesRowHoldsBackOnlyThatSchedule) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}")
      .set("schedules", "{x: {every: 1s, type: ping}, y: {every: 1s, type: ping}}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0) << daemon.log();
  const auto overdue = [&] {
    return metric_value(http_get(port, "/metrics").body, "pgjobd_schedule_overdue_seconds");
  };
  ASSERT_TRUE(wait_until(
      [&] { return ticks_of(schema, "x").size() >= 2 && ticks_of(schema, "y").size() >= 2; }, 15s));

  auto operator_session = open_connection(schema.config().database, "test");
  pqxx::work held(*operator_session);
  held.exec("SET LOCAL idle_in_transaction_session_timeout = '40s'");
  const std::string holder = held.exec("SELECT pg_backend_pid()")[0][0].c_str();
  held.exec("SELECT " + quote_identifier(schema.name()) + ".pgjobd_schedule_pause('x')");
  const std::int64_t held_at = wall_seconds();
  const std::size_t y_before = ticks_of(schema, "y").size();
  ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "y").size() >= y_before + 5; }, 20s))
      << "y stopped firing behind x's held row";
  EXPECT_LE(ticks_of(schema, "x").back(), held_at) << "x fired while its row was held";
  double most_overdue = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        most_overdue = std::max(most_overdue, overdue().value_or(0));
        return most_overdue >= 3;
      },
      15s))
      << "pgjobd_schedule_overdue_seconds " << overdue().value_or(-1);
  EXPECT_TRUE(daemon.wait_for_log("schedule x: tick")) << daemon.log();
  EXPECT_NE(daemon.log().find("locked by another session (pid " + holder + ")"), std::string::npos)
      << daemon.log();

  held.abort();
  const std::int64_t released_at = wall_seconds();
  ASSERT_TRUE(wait_until([&] { return ticks_of(schema, "x").back() >= released_at; }, 15s))
      << "x did not fire again after the transaction ended";
  EXPECT_TRUE(wait_until([&] { return overdue().value_or(-1) <= 1; }, 10s));
  EXPECT_TRUE(daemon.wait_for_log("schedule x: its row is free again")) << daemon.log();
  expect_each_tick_once(ticks_of(schema, "y"));
  std::printf(
      "[ schedules ] x's row held %lld s: y fired %zu ticks meanwhile; overdue gauge %.0f s\n",
      static_cast<long long>(released_at - held_at), ticks_of(schema, "y").size() - y_before,
      most_overdue);
  stop_daemon(daemon);
}

}  // namespace
}  // namespace pgjobd::testing
