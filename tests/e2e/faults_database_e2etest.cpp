// Fault tests on a private PostgreSQL cluster: pg_ctl restart mid-run, outages longer and
// shorter than the lease, backends terminated over and over, start while the server is down,
// a read-only database and a 1ms statement_timeout. The same daemon process must ride them
// out without spinning, and lose no job.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
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

// A daemon config on the private cluster: lease 2s, metrics on a free port, and a `work`
// handler that appends its job id to `effects` (then sleeps `sleep`, if given).
DaemonYaml cluster_yaml(const PrivateCluster& cluster, const ClusterSession& db,
                        const std::string& effects, const std::string& sleep = "") {
  DaemonYaml yaml(db.schema());
  yaml.set("database", "{url: " + yaml_quote(cluster.url()) + ", schema: " + db.schema() + "}")
      .set("worker", "{concurrency: 16}")
      .set("lease", "{duration: 2s}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      .shell_handler("work", "echo $PGJOBD_JOB_ID >> " + shell_quote(effects) +
                                 (sleep.empty() ? "" : "; sleep " + sleep));
  return yaml;
}

// Every job done, none left running, each one's side effect present at least once.
void expect_all_done_with_side_effects(ClusterSession& db, const std::string& effects,
                                       std::int64_t jobs) {
  EXPECT_EQ(db.count("status = 'done'"), jobs) << db.summary();
  EXPECT_EQ(db.count("status = 'running'"), 0) << db.summary();
  const auto runs = id_counts(effects);
  for (const std::int64_t id : db.ids("true")) {
    EXPECT_TRUE(runs.contains(id)) << "job " << id << " is done but its side effect is missing";
  }
}

int duplicates_in(const std::string& effects) {
  int n = 0;
  for (const auto& [id, count] : id_counts(effects)) n += count > 1 ? 1 : 0;
  return n;
}

// Polls /readyz in the background and remembers whether (and why) it was ever 503.
class ReadyzWatcher {
 public:
  explicit ReadyzWatcher(int port)
      : port_(port), thread_([this] {
          while (!stop_) {
            const HttpResponse response = http_get(port_, "/readyz");
            if (response.status == 503) {
              std::lock_guard lock(mutex_);
              if (not_ready_bodies_.size() < 5) not_ready_bodies_.push_back(response.body);
              ++not_ready_;
            }
            std::this_thread::sleep_for(5ms);
          }
        }) {}
  ~ReadyzWatcher() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int not_ready() const { return not_ready_; }
  std::string bodies() {
    std::lock_guard lock(mutex_);
    std::string text;
    for (const auto& body : not_ready_bodies_) text += body + "\n";
    return text;
  }

 private:
  const int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> not_ready_{0};
  std::mutex mutex_;
  std::vector<std::string> not_ready_bodies_;
  std::thread thread_;
};

bool ready(int port) { return http_get(port, "/readyz").status == 200; }

TEST(FaultsDatabaseE2E, PgRestartMidRunIsRiddenOutByTheSameDaemonProcess) {
  constexpr int kJobs = 1000;
  PrivateCluster cluster;
  ClusterSession db(cluster.url());
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  const DaemonYaml yaml = cluster_yaml(cluster, db, effects, "0.05");
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, " +
          std::to_string(kJobs) + ")");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0);
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") >= 100; }, 30s)) << db.summary();

  ReadyzWatcher watcher(port);
  const auto restarted_at = Clock::now();
  cluster.restart();
  const double restart_seconds = seconds_since(restarted_at);
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == kJobs; }, 60s))
      << db.summary() << "\n"
      << cluster.server_log_tail();
  const double finished_after = seconds_since(restarted_at);
  // /readyz must say ready again once the database is back (every part that reported a
  // problem has succeeded since): within a few poll and heartbeat rounds, not minutes.
  const bool ready_again = wait_until([&] { return ready(port); }, 10s);
  const double ready_after = seconds_since(restarted_at);
  watcher.stop();
  std::printf(
      "[ pg restart ] pg_ctl restart -m fast took %.2f s; all %d jobs done %.2f s after it "
      "began; /readyz 503 seen %d times, 200 again %.2f s after\n",
      restart_seconds, kJobs, finished_after, watcher.not_ready(), ready_after);

  EXPECT_TRUE(daemon.running()) << "the daemon exited instead of reconnecting";
  EXPECT_TRUE(ready_again) << "/readyz still 503 10 s after the restart: "
                           << http_get(port, "/readyz").body;
  // Every connection was cut, so at least the first claim after the restart failed and
  // set a problem; the poller samples every few ms.
  EXPECT_GT(watcher.not_ready(), 0) << "/readyz never reported the outage";
  EXPECT_NE(watcher.bodies().find("connection"), std::string::npos) << watcher.bodies();
  expect_all_done_with_side_effects(db, effects, kJobs);
  EXPECT_EQ(count_occurrences(daemon.log(), "pgjobd ready"), 1) << "the engine restarted";
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

TEST(FaultsDatabaseE2E, OutageLongerThanTheLeaseLosesNothing) {
  constexpr int kJobs = 300;
  constexpr int kLong = 3;
  PrivateCluster cluster;
  ClusterSession db(cluster.url());
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  const std::string long_pids = dir.file("long_pids");
  DaemonYaml yaml = cluster_yaml(cluster, db, effects, "0.$((PGJOBD_JOB_ID % 4))");
  // A first run outlives the outage unless the daemon stops it; later runs end at once (a
  // released job runs its attempt again, so the marker is a file, not the attempt number).
  const std::string marker = shell_quote(dir.path()) + "/long.$PGJOBD_JOB_ID";
  yaml.shell_handler("long",
                     "echo $PGJOBD_JOB_ID >> " + shell_quote(effects) + "; if [ ! -e " + marker +
                         " ]; then touch " + marker + "; echo $$ >> " + shell_quote(long_pids) +
                         "; exec sleep 60; fi",
                     "kill_grace: 500ms");
  db.exec("INSERT INTO {jobs} (type, priority) SELECT 'long', 1 FROM generate_series(1, " +
          std::to_string(kLong) + ")");
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, " +
          std::to_string(kJobs) + ")");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_TRUE(wait_until(
      [&] { return db.count("status = 'done'") >= 50 && read_lines(long_pids).size() == kLong; },
      30s))
      << db.summary();

  // Freeze the daemon for the snapshot, so the jobs it holds when the server goes down are
  // exactly the ones the snapshot shows. A window, not a condition: a claim sent just before
  // the freeze may still commit on the server.
  const ContinueOnExit resume{daemon};
  daemon.signal(SIGSTOP);
  std::this_thread::sleep_for(200ms);
  const std::set<std::int64_t> in_flight = db.ids("status = 'running'");
  cluster.stop();
  daemon.signal(SIGCONT);
  const auto down = Clock::now();
  // The outage's length is the point: well past the 2 s lease, so the daemon's own lease
  // guard stops the long handlers, and once the server is back the rescuer hands out
  // every job whose lease ran out.
  std::this_thread::sleep_for(4s);
  EXPECT_TRUE(daemon.running());
  EXPECT_EQ(http_get(port, "/readyz").status, 503);
  for (const std::string& pid : read_lines(long_pids)) {
    EXPECT_FALSE(process_alive(static_cast<pid_t>(std::stol(pid)), "sleep"))
        << "a handler kept running " << seconds_since(down) << " s into the outage, past its "
        << "lease: another daemon may run the job meanwhile";
  }
  EXPECT_NE(daemon.log().find("ran out without a heartbeat renewing it"), std::string::npos)
      << daemon.log();
  const auto back = Clock::now();
  cluster.start();
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == kJobs + kLong; }, 60s))
      << db.summary() << "\n"
      << daemon.log();
  std::printf(
      "[ outage 4s ] all jobs done %.2f s after the server came back; %d ran twice "
      "(%zu in flight at the outage)\n",
      seconds_since(back), duplicates_in(effects), in_flight.size());
  EXPECT_TRUE(daemon.running());
  expect_all_done_with_side_effects(db, effects, kJobs + kLong);
  for (const auto& [id, n] : id_counts(effects)) {
    if (n > 1) {
      EXPECT_TRUE(in_flight.contains(id)) << "job " << id << " ran " << n << " times";
    }
  }
  EXPECT_TRUE(wait_until([&] { return ready(port); }, 10s)) << http_get(port, "/readyz").body;
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

// README: a job runs again only when its daemon dies or loses the database for longer than
// the lease while the job runs, or (asynchronous claims, the default) when the server
// crashes just after the job was claimed. The outage here is a crash (immediate stop), so
// the daemon uses synchronous claims: then an outage well within the lease must not make
// any job run twice, including jobs that finished during it and whose completion waits to
// be written. (OutageLongerThanTheLeaseLosesNothing crashes the server under the default.)
TEST(FaultsDatabaseE2E, OutageShorterThanTheLeaseRunsNoJobTwice) {
  constexpr int kJobs = 300;
  PrivateCluster cluster;
  ClusterSession db(cluster.url());
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  DaemonYaml yaml = cluster_yaml(cluster, db, effects, "0.$((PGJOBD_JOB_ID % 3))");
  yaml.set("lease", "{duration: 6s}")
      .set("metrics", "{listen: \"\"}")
      .set("database", "{url: " + yaml_quote(cluster.url()) + ", schema: " + db.schema() +
                           ", synchronous_claims: true}");
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, " +
          std::to_string(kJobs) + ")");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") >= 50; }, 30s)) << db.summary();
  cluster.stop();
  // The outage's length is the point: 1.5 s, well within the 6 s lease.
  std::this_thread::sleep_for(1500ms);
  cluster.start();
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == kJobs; }, 60s))
      << db.summary() << "\n"
      << daemon.log();
  std::printf("[ outage 1.5s ] %d jobs ran twice; %lld rescued\n", duplicates_in(effects),
              static_cast<long long>(db.count("errors::text LIKE '%rescued%'")));
  expect_all_done_with_side_effects(db, effects, kJobs);
  EXPECT_EQ(duplicates_in(effects), 0)
      << db.query(
             "SELECT string_agg(id || ': ' || errors::text, E'\\n') FROM {jobs} WHERE "
             "attempts > 1")
      << "\n"
      << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

TEST(FaultsDatabaseE2E, BackendsTerminatedEvery200msLoseNothing) {
  constexpr int kJobs = 2000;
  PrivateCluster cluster;
  ClusterSession db(cluster.url());
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  DaemonYaml yaml = cluster_yaml(cluster, db, effects);
  yaml.set("metrics", "{listen: \"\"}");
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, " +
          std::to_string(kJobs) + ")");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  std::atomic<int> rounds{0};
  std::atomic<int> terminated{0};
  std::atomic<int> failed_rounds{0};
  std::jthread terminator([&](const std::stop_token& stop) {
    ClusterSession killer(cluster.url(), db.schema());
    while (!stop.stop_requested()) {
      try {
        terminated += killer.terminate_daemon_sessions();
      } catch (const std::exception&) {
        ++failed_rounds;
      }
      ++rounds;
      // The fault's rhythm (every ~200 ms), not a wait for a condition.
      std::this_thread::sleep_for(200ms);
    }
  });
  const auto started = Clock::now();
  const bool all_done = wait_until([&] { return db.count("status = 'done'") == kJobs; }, 90s);
  terminator.request_stop();
  terminator.join();
  EXPECT_EQ(failed_rounds.load(), 0);
  std::printf(
      "[ terminate ] %d jobs done in %.2f s while %d pgjobd sessions were terminated in %d "
      "rounds; %d jobs ran more than once\n",
      kJobs, seconds_since(started), terminated.load(), rounds.load(), duplicates_in(effects));
  ASSERT_TRUE(all_done) << db.summary();
  EXPECT_GT(terminated.load(), rounds.load() / 2) << "the fault was hardly injected";
  EXPECT_TRUE(daemon.running());
  expect_all_done_with_side_effects(db, effects, kJobs);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

TEST(FaultsDatabaseE2E, DaemonStartedWhileTheDatabaseIsDownWaitsThenWorks) {
  PrivateCluster cluster;
  ClusterSession db(cluster.url());
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  const DaemonYaml yaml = cluster_yaml(cluster, db, effects);
  cluster.stop();

  DaemonProcess daemon(yaml.text());
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0) << daemon.log();
  ASSERT_TRUE(daemon.wait_for_log("database not reachable (attempt 3)", 15s)) << daemon.log();
  const std::string log = daemon.log();
  EXPECT_NE(log.find("database not reachable (attempt 1), retrying in "), std::string::npos) << log;
  EXPECT_NE(log.find("Connection refused"), std::string::npos) << log;
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  const HttpResponse readyz = http_get(port, "/readyz");
  EXPECT_EQ(readyz.status, 503);
  EXPECT_NE(readyz.body.find("engine: starting"), std::string::npos) << readyz.body;
  EXPECT_TRUE(daemon.running());

  const auto started = Clock::now();
  cluster.start();
  ASSERT_TRUE(daemon.wait_ready(20s)) << daemon.log();
  std::printf("[ db down  ] ready %.2f s after the server started (%d attempts logged)\n",
              seconds_since(started),
              count_occurrences(daemon.log(), "database not reachable (attempt"));
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, 20)");
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == 20; }, 20s))
      << db.summary() << "\n"
      << daemon.log();
  expect_all_done_with_side_effects(db, effects, 20);
  EXPECT_TRUE(wait_until([&] { return ready(port); }, 5s)) << http_get(port, "/readyz").body;
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

// A database-wide setting that makes the daemon's statements fail once its sessions are
// renewed.
struct SessionFault {
  std::string name;
  std::string inject;          // SQL that applies it to new sessions
  std::string lift;            // SQL that removes it
  std::string expected_error;  // in the daemon's log while it applies
  double max_cpu_share;        // of one core, while it applies
  bool every_claim_fails;      // false when a fast claim may still get through
};

// Applies `fault`, checks the daemon neither exits nor spins while its statements fail, lifts
// it and checks every job then completes and the daemon is ready again.
void ride_out_session_fault(const SessionFault& fault) {
  PrivateCluster cluster;
  ClusterSession db(cluster.url());
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  const DaemonYaml yaml = cluster_yaml(cluster, db, effects);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const int port = daemon.metrics_port();
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, 10)");
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == 10; }, 20s)) << db.summary();

  db.exec(fault.inject);
  // Settings apply to new sessions: cut the daemon's current ones.
  db.terminate_daemon_sessions();
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, 200)");
  ASSERT_TRUE(daemon.wait_for_log(fault.expected_error, 15s)) << daemon.log();
  const auto cpu_before = cpu_seconds(daemon.pid());
  // A window is the point here: the daemon's CPU use while every statement fails.
  constexpr double kWindow = 3.0;
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(kWindow * 1000)));
  const auto cpu_after = cpu_seconds(daemon.pid());
  ASSERT_TRUE(cpu_before && cpu_after) << "the daemon is gone";
  const double share = (*cpu_after - *cpu_before) / kWindow;
  EXPECT_TRUE(daemon.running()) << daemon.log();
  EXPECT_LT(share, fault.max_cpu_share) << "the daemon spins while the database refuses its work";
  const std::int64_t done_during = db.count("status = 'done'") - 10;
  if (fault.every_claim_fails) {
    EXPECT_EQ(done_during, 0);
    EXPECT_EQ(http_get(port, "/readyz").status, 503) << "ready while no claim can succeed";
  }

  db.exec(fault.lift);
  db.terminate_daemon_sessions();
  const auto lifted = Clock::now();
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == 210; }, 30s))
      << db.summary() << "\n"
      << daemon.log();
  const double recovered = seconds_since(lifted);
  const bool ready_again = wait_until([&] { return ready(port); }, 10s);
  std::printf(
      "[ %s ] CPU %.1f%% of a core during the fault, %lld jobs done during it, all done "
      "%.2f s after it was lifted, /readyz 200 again %.2f s after\n",
      fault.name.c_str(), share * 100, static_cast<long long>(done_during), recovered,
      seconds_since(lifted));
  EXPECT_TRUE(ready_again) << http_get(port, "/readyz").body;
  expect_all_done_with_side_effects(db, effects, 210);
  EXPECT_TRUE(daemon.running());
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

TEST(FaultsDatabaseE2E, ReadOnlyDatabaseIsSurvivedWithoutSpinning) {
  ride_out_session_fault({"read-only",
                          "ALTER DATABASE pgjobd SET default_transaction_read_only = on",
                          "ALTER DATABASE pgjobd RESET default_transaction_read_only",
                          "in a read-only transaction", 0.10, true});
}

TEST(FaultsDatabaseE2E, OneMillisecondStatementTimeoutIsSurvived) {
  ride_out_session_fault({"statement_timeout", "ALTER ROLE pgjobd SET statement_timeout = '1ms'",
                          "ALTER ROLE pgjobd RESET statement_timeout",
                          "canceling statement due to statement timeout", 0.30, false});
}

}  // namespace
}  // namespace pgjobd::testing
