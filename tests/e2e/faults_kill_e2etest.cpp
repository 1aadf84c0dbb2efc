// Fault tests with the real binary: SIGKILL with hundreds of jobs in flight (nothing lost,
// duplicates only among in-flight jobs, recovery time), a frozen daemon (SIGSTOP past its
// lease) whose late write is fenced off, and the no-fault control for the fencing signals.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include "support/daemon_process.hpp"
#include "support/private_cluster.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::set<std::int64_t> ids_where(TestSchema& schema, const std::string& where) {
  std::set<std::int64_t> ids;
  for (const std::string& id : schema.column("SELECT id FROM {jobs} WHERE " + where)) {
    ids.insert(std::stoll(id));
  }
  return ids;
}

// '{1,2,3}'::bigint[]
std::string id_array(const std::set<std::int64_t>& ids) {
  std::string list;
  for (const auto id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  return "'{" + list + "}'::bigint[]";
}

TEST(FaultsKillE2E, SigkillWithHundredsOfJobsInFlightLosesNoneAndRerunsOnlyThose) {
  constexpr int kJobs = 400;
  TestSchema schema;
  TempDir dir;
  const std::string effects = dir.file("effects");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 200}")
      .set("lease", "{duration: 3s}")
      .set("poll", "{min_interval: 20ms, max_interval: 200ms}")
      // The side effect first, then 1.0 to 1.9 s of work.
      .shell_handler("work", "echo $PGJOBD_JOB_ID >> " + shell_quote(effects) +
                                 "; exec sleep 1.$((PGJOBD_JOB_ID % 10))");
  schema.insert_jobs("work", kJobs);

  std::set<std::int64_t> in_flight;
  Clock::time_point killed_at;
  {
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
    ASSERT_TRUE(wait_until(
        [&] {
          return schema.count("status = 'done'") >= 20 && schema.count("status = 'running'") >= 150;
        },
        30s))
        << table_summary(schema);
    in_flight = ids_where(schema, "status = 'running'");
    daemon.signal(SIGKILL);
    killed_at = Clock::now();
    ASSERT_EQ(daemon.wait_for_exit(10s), 128 + SIGKILL);
  }
  // A window, not a condition: a claim the daemon sent just before it died may still commit
  // on the server. Whatever is running after that is exactly the set the dead daemon held.
  std::this_thread::sleep_for(300ms);
  const std::set<std::int64_t> running_after = ids_where(schema, "status = 'running'");
  in_flight.insert(running_after.begin(), running_after.end());
  ASSERT_GE(in_flight.size(), 150u);
  const std::int64_t done_at_kill = schema.count("status = 'done'");

  DaemonProcess restarted(yaml.text());
  ASSERT_TRUE(restarted.wait_ready()) << restarted.log();
  const std::string in_flight_ids = id_array(in_flight);
  const auto all_in_flight_done = [&] {
    return schema.count("status = 'done' AND id = ANY(" + in_flight_ids + ")") ==
           static_cast<std::int64_t>(in_flight.size());
  };
  ASSERT_TRUE(wait_until(all_in_flight_done, 30s)) << table_summary(schema);
  const double recovery = seconds_since(killed_at);
  std::printf(
      "[ recovery ] %zu jobs in flight at SIGKILL (%lld done before), all done %.2f s "
      "after the kill (lease 3s)\n",
      in_flight.size(), static_cast<long long>(done_at_kill), recovery);
  // One lease for the dead daemon's leases (and leadership) to run out, a rescue pass, then
  // up to two rounds of 1-2 s handlers (the restarted daemon first fills its slots with the
  // jobs that were still pending).
  EXPECT_LT(recovery, 3.0 + 10.0);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 30s))
      << table_summary(schema);

  EXPECT_EQ(schema.count("status <> 'done'"), 0) << table_summary(schema);
  EXPECT_EQ(schema.count("locked_until IS NOT NULL"), 0);
  const auto runs = id_counts(effects);
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(kJobs)) << "a job without its side effect";
  int duplicates = 0;
  for (const auto& [id, n] : runs) {
    if (n > 1) {
      ++duplicates;
      EXPECT_TRUE(in_flight.contains(id))
          << "job " << id << " ran " << n << " times but was not in flight at the SIGKILL";
      EXPECT_EQ(n, 2) << "job " << id << " ran " << n << " times after a single kill";
    }
  }
  // Jobs not in flight ran once, on their first attempt.
  EXPECT_EQ(schema.count("attempts <> 1 AND NOT id = ANY(" + in_flight_ids + ")"), 0);
  std::printf("[ recovery ] duplicate runs: %d (all among the in-flight jobs)\n", duplicates);
  restarted.signal(SIGTERM);
  EXPECT_EQ(restarted.wait_for_exit(20s), 0);
}

TEST(FaultsKillE2E, FrozenDaemonIsFencedOffAndStopsItsHandlerWhenItWakes) {
  TestSchema schema;
  TempDir dir;
  const std::string runs = dir.file("runs");
  // `sh -c SCRIPT NAME`: $0 is the daemon's name. A's run outlives any wait of this test
  // unless A stops it; B's run is quick.
  const std::string script = "echo \"$PGJOBD_JOB_ATTEMPT $$ $0\" >> " + shell_quote(runs) +
                             "; if [ \"$0\" = A ]; then exec sleep 60; fi";
  const auto config_for = [&](const std::string& name) {
    DaemonYaml yaml(schema.name());
    yaml.set("lease", "{duration: 2s}")
        .set("metrics", "{listen: \"127.0.0.1:0\"}")
        .handler("task",
                 "{exec: [/bin/sh, -c, " + yaml_quote(script) + ", " + name + "], kill_grace: 1s}");
    return yaml.text();
  };
  const std::string id = schema.query("INSERT INTO {jobs} (type) VALUES ('task') RETURNING id");
  const std::string row_sql = "SELECT row_to_json(j)::text FROM {jobs} j WHERE id = " + id;

  DaemonProcess a(config_for("A"));
  ContinueOnExit resume_a{a};
  ASSERT_TRUE(a.wait_ready()) << a.log();
  const int a_port = a.metrics_port();
  ASSERT_GT(a_port, 0);
  ASSERT_TRUE(wait_until([&] { return read_lines(runs).size() == 1; }, 15s)) << a.log();
  const std::string first = read_lines(runs).at(0);
  ASSERT_EQ(first.substr(0, 2), "1 ") << first;
  ASSERT_EQ(first.substr(first.size() - 2), " A") << first;
  const pid_t a_handler = static_cast<pid_t>(std::stol(first.substr(2)));

  a.signal(SIGSTOP);
  const auto frozen_at = Clock::now();
  DaemonProcess b(config_for("B"));
  ASSERT_TRUE(b.wait_ready()) << b.log();
  ASSERT_TRUE(wait_until(
      [&] { return schema.query("SELECT status || ' ' || attempts FROM {jobs}") == "done 2"; },
      20s))
      << schema.query(row_sql) << "\n"
      << b.log();
  std::printf("[ fencing  ] B rescued and finished the job %.2f s after A froze (lease 2s)\n",
              seconds_since(frozen_at));
  const std::string row_after_b = schema.query(row_sql);
  ASSERT_EQ(read_lines(runs).size(), 2u);
  EXPECT_EQ(read_lines(runs).at(1).substr(0, 2), "2 ");
  EXPECT_EQ(read_lines(runs).at(1).substr(read_lines(runs).at(1).size() - 2), " B");
  ASSERT_TRUE(process_alive(a_handler, "sleep"))
      << "A's handler should still run while A is frozen";

  a.signal(SIGCONT);
  // A wakes with a job whose lease is long gone: the lease guard or the heartbeat (whichever
  // runs first) stops the handler, and the release A then writes is refused.
  ASSERT_TRUE(wait_until([&] { return !process_alive(a_handler, "sleep"); }, 10s))
      << "A kept running a job it no longer owns\n"
      << a.log();
  const std::string a_log_after = [&] {
    wait_until([&] { return a.log().find("completions were stale") != std::string::npos; }, 10s);
    return a.log();
  }();
  EXPECT_TRUE(a_log_after.find("lost the lease of 1 running job(s); stopping them") !=
                  std::string::npos ||
              a_log_after.find("the lease of 1 running job(s) ran out") != std::string::npos)
      << a_log_after;
  EXPECT_NE(a_log_after.find("1 of 1 completions were stale"), std::string::npos) << a_log_after;
  double stale = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        stale = metric_value(http_get(a_port, "/metrics").body, "pgjobd_stale_writes_total")
                    .value_or(0);
        return stale >= 1;
      },
      5s));
  EXPECT_GE(stale, 1);

  EXPECT_EQ(schema.query(row_sql), row_after_b) << "A's late write changed the row";
  EXPECT_EQ(read_lines(runs).size(), 2u);
  EXPECT_TRUE(a.running()) << "A must carry on after losing a lease";
  EXPECT_TRUE(b.running());
  EXPECT_EQ(schema.count("status = 'running'"), 0);
}

// The control for the fencing tests: without any fault, no job may be reported as lost or
// its write as stale (pgjobd_stale_writes_total is the operator's signal that rescues and
// fencing happened). Many short jobs and a short lease make heartbeats overlap completions.
TEST(FaultsKillE2E, WithoutFaultsNoLeaseIsReportedLostAndNoWriteStale) {
  constexpr int kJobs = 3000;
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 16}")
      .set("lease", "{duration: 1s}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      .handler("work", "{exec: [/bin/true]}");
  schema.insert_jobs("work", kJobs);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 60s))
      << table_summary(schema);
  EXPECT_EQ(schema.count("attempts <> 1"), 0);
  EXPECT_EQ(metric_value(http_get(port, "/metrics").body, "pgjobd_stale_writes_total"), 0.0);
  EXPECT_EQ(daemon.log().find("lost the lease"), std::string::npos) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

}  // namespace
}  // namespace pgjobd::testing
