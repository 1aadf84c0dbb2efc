// A database that stops answering: commits that hang (every commit waits for a synchronous
// standby that does not exist) and a network path that drops every packet without a reset
// (a network namespace of the test's own, a veth pair, and a blackhole on it). The daemon
// must say so on /readyz and in its log within seconds, end on SIGTERM within a bound,
// resume by itself once the database answers again, and lose no job.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/netns.hpp"
#include "support/private_cluster.hpp"
#include "support/test_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Lease 4 s, so database.call_timeout is its default lease/2 = 2 s and /readyz's stall
// bound min(5 s, call_timeout) = 2 s: a call still waiting is abandoned after 2 s.
// SIGTERM's documented bound (README "Signals"): shutdown.timeout 3 s + kill_grace 1 s + 1 s
// + the completion flush min(lease, 10 s) = 4 s + the 10 s margin.
constexpr auto kStallShutdownBound = 19s;
// Bounds with room for a loaded two-core machine; the printed numbers are the measurement.
constexpr double kStallDetectionBoundSeconds = 10;

// Jobs of type `work` that append their id to `effects` and take 0.1 s.
DaemonYaml stall_daemon_yaml(const std::string& url, const std::string& schema,
                             const std::string& effects) {
  DaemonYaml yaml(schema);
  yaml.set("database", "{url: " + yaml_quote(url) + ", schema: " + schema + "}")
      .set("worker", "{concurrency: 8}")
      .set("lease", "{duration: 4s}")
      .set("shutdown", "{timeout: 3s}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      .shell_handler("work", "echo $PGJOBD_JOB_ID >> " + shell_quote(effects) + "; sleep 0.1",
                     "kill_grace: 1s");
  return yaml;
}

void insert_stall_jobs(ClusterSession& db, int n) {
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, " + std::to_string(n) +
          ")");
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// /readyz and /healthz sampled every ~20 ms on a thread of its own (inside `link`'s
// namespace when given, where the daemon's HTTP server listens), each sample kept with the
// time its answer came.
class ReadinessTimeline {
 public:
  struct Sample {
    Clock::time_point at;
    long readyz = 0;  // 0: no answer
    long healthz = 0;
    std::string readyz_body;
  };

  explicit ReadinessTimeline(int port, const NetnsLink* link = nullptr)
      : thread_([this, port, link] {
          try {
            if (link != nullptr) link->enter_on_this_thread();
          } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
            return;
          }
          while (!stop_) {
            const HttpResponse readyz = http_get(port, "/readyz");
            const HttpResponse healthz = http_get(port, "/healthz");
            {
              std::lock_guard lock(mutex_);
              samples_.push_back({Clock::now(), readyz.status, healthz.status, readyz.body});
            }
            std::this_thread::sleep_for(20ms);
          }
        }) {}
  ~ReadinessTimeline() { stop(); }
  ReadinessTimeline(const ReadinessTimeline&) = delete;
  ReadinessTimeline& operator=(const ReadinessTimeline&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // The first sample at or after `since` whose /readyz answered `status`, waiting up to
  // `timeout` for one.
  std::optional<Sample> first_readyz(long status, Clock::time_point since,
                                     std::chrono::milliseconds timeout) {
    std::optional<Sample> found;
    wait_until(
        [&] {
          std::lock_guard lock(mutex_);
          for (const Sample& sample : samples_) {
            if (sample.at >= since && sample.readyz == status) {
              found = sample;
              return true;
            }
          }
          return false;
        },
        timeout);
    return found;
  }

  // Samples between `from` and `to` whose /healthz did not answer 200.
  int healthz_failures(Clock::time_point from, Clock::time_point to) {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count_if(samples_.begin(), samples_.end(), [&](const Sample& s) {
      return s.at >= from && s.at <= to && s.healthz != 200;
    }));
  }

  // The distinct /readyz 503 bodies between `from` and `to`, up to `limit` of them.
  std::string not_ready_bodies(Clock::time_point from, Clock::time_point to,
                               std::size_t limit = 6) {
    std::lock_guard lock(mutex_);
    std::set<std::string> seen;
    std::string text;
    for (const Sample& sample : samples_) {
      if (sample.at < from || sample.at > to || sample.readyz != 503) continue;
      if (seen.size() >= limit || !seen.insert(sample.readyz_body).second) continue;
      text += "  " + sample.readyz_body + "\n";
    }
    return text;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<Sample> samples_;
  std::thread thread_;  // last: started once the members it uses exist
};

// The first line of the daemon's log after byte `offset` that contains one of `markers`,
// waiting up to `timeout` for one; with the time it was seen.
struct LogHit {
  Clock::time_point at;
  std::string line;
};
std::optional<LogHit> first_log_line(DaemonProcess& daemon, std::size_t offset,
                                     const std::vector<std::string>& markers,
                                     std::chrono::milliseconds timeout) {
  std::optional<LogHit> hit;
  wait_until(
      [&] {
        const std::string log = daemon.log();
        std::size_t best = std::string::npos;
        for (const std::string& marker : markers) {
          best = std::min(best, log.find(marker, std::min(offset, log.size())));
        }
        if (best == std::string::npos) return false;
        const auto newline = log.rfind('\n', best);
        const auto start = newline == std::string::npos ? 0 : newline + 1;
        const auto end = log.find('\n', best);
        hit = LogHit{Clock::now(), log.substr(start, end == std::string::npos ? end : end - start)};
        return true;
      },
      timeout);
  return hit;
}

// Sum of every sample of `name` (all label sets) in Prometheus text.
double metric_sum(const std::string& metrics, const std::string& name) {
  double sum = 0;
  std::size_t pos = 0;
  while ((pos = metrics.find("\n" + name, pos)) != std::string::npos) {
    const auto end = metrics.find('\n', pos + 1);
    const std::string line = metrics.substr(pos + 1, end - pos - 1);
    pos = end;
    const char after = line.size() > name.size() ? line[name.size()] : '\0';
    if (after != '{' && after != ' ') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// The samples of pgjobd_db_call_timeouts_total, for the report.
std::string call_timeout_lines(const std::string& metrics) {
  std::string text;
  std::size_t pos = 0;
  while ((pos = metrics.find("\npgjobd_db_call_timeouts_total{", pos)) != std::string::npos) {
    const auto end = metrics.find('\n', pos + 1);
    text += metrics.substr(pos + 1, end - pos - 1) + "; ";
    pos = end;
  }
  return text;
}

int stall_duplicates(const std::string& effects) {
  int n = 0;
  for (const auto& [id, count] : id_counts(effects)) n += count > 1 ? 1 : 0;
  return n;
}

// How many jobs the rescuer handed out again (their lease ran out), for the report.
std::string rescued_jobs(ClusterSession& db) {
  return std::to_string(db.count("errors::text LIKE '%rescued%'"));
}

// Every job done (none dead, failed or left running), each one's side effect present, and a
// job that ran more than once has an earlier attempt on record as not done (rescued once
// its lease ran out, or released): none ran again unnoticed.
void expect_every_job_done(ClusterSession& db, const std::string& effects, std::int64_t jobs) {
  EXPECT_EQ(db.count("status = 'done'"), jobs) << db.summary();
  EXPECT_EQ(db.count("status = 'dead'"), 0) << db.summary();
  const auto runs = id_counts(effects);
  int missing = 0;
  for (const std::int64_t id : db.ids("true")) missing += runs.contains(id) ? 0 : 1;
  EXPECT_EQ(missing, 0) << "jobs done without their side effect";
  const std::set<std::int64_t> on_record = db.ids("jsonb_array_length(attempt_log) > 0");
  for (const auto& [id, n] : runs) {
    if (n > 1) {
      EXPECT_TRUE(on_record.contains(id))
          << "job " << id << " ran " << n << " times with no earlier attempt on record";
    }
  }
}

// ALTER SYSTEM is not transactional and pg_reload_conf() writes nothing, so neither waits
// for the standby; each backend applies the setting before its next statement.
void make_commits_hang(ClusterSession& db) {
  db.exec("ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
  db.exec("SELECT pg_reload_conf()");
}
void let_commits_return(ClusterSession& db) {
  db.exec("ALTER SYSTEM RESET synchronous_standby_names");
  db.exec("SELECT pg_reload_conf()");
}

TEST(FaultsStallE2E, CommitsThatHangMakeReadyzNameTheWaitingPartAndTheSameDaemonResumes) {
  constexpr int kFirstJobs = 400;
  constexpr int kLaterJobs = 50;
  constexpr auto kHangLength = 6s;
  PrivateCluster cluster;
  // synchronous_commit=local: the test's own writes and reads go on while the daemon's
  // commits wait for a standby that does not exist.
  ClusterSession db(cluster.url(), "stall", {"synchronous_commit=local"});
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  DaemonProcess daemon(stall_daemon_yaml(cluster.url(), db.schema(), effects).text());
  ASSERT_TRUE(daemon.wait_ready(30s)) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0);
  insert_stall_jobs(db, kFirstJobs);
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") >= 80; }, 30s)) << db.summary();
  ReadinessTimeline readiness(port);
  ASSERT_TRUE(readiness.first_readyz(200, Clock::now(), 10s)) << http_get(port, "/readyz").body;

  const std::size_t log_before = daemon.log().size();
  make_commits_hang(db);
  const auto hung_at = Clock::now();
  const auto not_ready = readiness.first_readyz(503, hung_at, 30s);
  const auto abandoned = first_log_line(daemon, log_before, {"(database.call_timeout)"}, 30s);
  // The hang's length is the point: past the 4 s lease and several call deadlines, so
  // leases lapse and abandoned sessions are opened anew, over and over.
  std::this_thread::sleep_until(hung_at + kHangLength);
  const std::string metrics_during = http_get(port, "/metrics").body;
  let_commits_return(db);
  const auto released_at = Clock::now();
  insert_stall_jobs(db, kLaterJobs);

  const bool all_done =
      wait_until([&] { return db.count("status = 'done'") == kFirstJobs + kLaterJobs; }, 60s);
  const double done_after = seconds_since(released_at);
  const auto ready_again = readiness.first_readyz(200, released_at, 20s);
  readiness.stop();
  std::printf(
      "[ commits hang ] /readyz 503 %.2f s after the hang began, \"call_timeout\" logged after "
      "%.2f s, hang lifted after %.2f s; all %d jobs done %.2f s later, /readyz 200 %.2f s "
      "after the lift; %d jobs ran twice, %s rescued; /healthz failed %d times; %s; first 503 "
      "body: %s\n",
      not_ready ? seconds_between(hung_at, not_ready->at) : -1.0,
      abandoned ? seconds_between(hung_at, abandoned->at) : -1.0,
      seconds_between(hung_at, released_at), kFirstJobs + kLaterJobs, done_after,
      ready_again ? seconds_between(released_at, ready_again->at) : -1.0, stall_duplicates(effects),
      rescued_jobs(db).c_str(), readiness.healthz_failures(hung_at, released_at),
      call_timeout_lines(metrics_during).c_str(), not_ready ? not_ready->readyz_body.c_str() : "");

  ASSERT_TRUE(not_ready) << "/readyz never said not ready while every commit hung";
  EXPECT_LE(seconds_between(hung_at, not_ready->at), kStallDetectionBoundSeconds);
  // It names what waits: a claim, heartbeat or completion without an answer.
  EXPECT_TRUE(contains(not_ready->readyz_body, "no answer from the database"))
      << not_ready->readyz_body;
  EXPECT_TRUE(contains(not_ready->readyz_body, "heartbeat") ||
              contains(not_ready->readyz_body, "completer") ||
              contains(not_ready->readyz_body, "fetcher"))
      << not_ready->readyz_body;
  ASSERT_TRUE(abandoned) << "no call was logged as abandoned at database.call_timeout";
  EXPECT_TRUE(contains(abandoned->line, "no answer from the database within 2s"))
      << abandoned->line;
  EXPECT_GT(metric_sum(metrics_during, "pgjobd_db_call_timeouts_total"), 0) << metrics_during;
  // Abandoned calls are not a wedged loop: liveness holds, nothing restarts the daemon.
  EXPECT_EQ(readiness.healthz_failures(hung_at, released_at), 0);

  ASSERT_TRUE(all_done) << db.summary() << "\n" << daemon.log();
  EXPECT_TRUE(ready_again) << "/readyz still not ready 20 s after the commits returned";
  EXPECT_TRUE(daemon.running());
  EXPECT_EQ(count_occurrences(daemon.log(), "pgjobd ready"), 1) << "the engine restarted";
  expect_every_job_done(db, effects, kFirstJobs + kLaterJobs);
  stop_daemon(daemon);
}

TEST(FaultsStallE2E, SigtermWhileCommitsHangEndsTheDaemonAndASecondOneFinishesEveryJob) {
  constexpr int kJobs = 400;
  PrivateCluster cluster;
  // synchronous_commit=local: the test's own writes and reads go on while the daemon's
  // commits wait for a standby that does not exist.
  ClusterSession db(cluster.url(), "stall", {"synchronous_commit=local"});
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  const DaemonYaml yaml = stall_daemon_yaml(cluster.url(), db.schema(), effects);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready(30s)) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0);
  insert_stall_jobs(db, kJobs);
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") >= 80; }, 30s)) << db.summary();
  make_commits_hang(db);
  const auto hung_at = Clock::now();
  // The hang has reached the daemon's calls before the signal.
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 503; }, 30s))
      << daemon.log();

  const std::size_t log_before = daemon.log().size();
  const auto signalled_at = Clock::now();
  daemon.signal(SIGTERM);
  const double bound = std::chrono::duration<double>(kStallShutdownBound).count();
  const auto exit_code = daemon.wait_for_exit(60s);
  const double exit_seconds = seconds_since(signalled_at);
  const std::string drain_log = daemon.log().substr(std::min(log_before, daemon.log().size()));
  let_commits_return(db);
  const auto released_at = Clock::now();
  std::printf(
      "[ SIGTERM in hang ] commits hung for %.2f s before the signal; exit %d %.2f s after "
      "SIGTERM (bound %.0f s); %d calls abandoned during the drain; its last line: %s\n",
      seconds_between(hung_at, signalled_at), exit_code.value_or(-1), exit_seconds, bound,
      count_occurrences(drain_log, "no answer from the database"),
      drain_log.substr(drain_log.rfind('\n', drain_log.size() - 2) + 1).c_str());
  ASSERT_TRUE(exit_code) << "pgjobd still runs 60 s after SIGTERM:\n" << drain_log;
  EXPECT_TRUE(contains(drain_log, "the process ends within 19s")) << drain_log;
  // The bound holds whatever the database does; 2 s for a loaded machine to reap it.
  EXPECT_LE(exit_seconds, bound + 2) << drain_log;
  // Its documented codes: 10 + N when N completions could not be written (commits hang, so
  // some cannot), 3 when the bound expired first.
  EXPECT_TRUE(*exit_code == 3 || (*exit_code >= 11 && *exit_code <= 109)) << *exit_code << "\n"
                                                                          << drain_log;

  DaemonProcess second(yaml.text());
  ASSERT_TRUE(second.wait_ready(30s)) << second.log();
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == kJobs; }, 60s))
      << db.summary() << "\n"
      << second.log();
  std::printf("[ SIGTERM in hang ] a second daemon finished every job %.2f s after the lift\n",
              seconds_since(released_at));
  expect_every_job_done(db, effects, kJobs);
  stop_daemon(second);
}

TEST(FaultsStallE2E, NetworkBlackholeIsSeenWithinSecondsAndRiddenOutLosingNothing) {
  constexpr int kJobs = 400;
  constexpr auto kBlackholeLength = 6s;  // past the 4 s lease
  if (const std::string why = NetnsLink::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  NetnsLink link;
  Blackhole::Method method{};
  if (std::string why; !Blackhole::available(link, method, why)) {
    GTEST_SKIP() << "no way to drop packets on a veth here: " << why;
  }
  PrivateCluster cluster;
  cluster.listen_also(link.host_address(), link.subnet());
  ClusterSession db(cluster.url(), "blackhole");
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  DaemonProcess daemon(
      stall_daemon_yaml(cluster.url_on(link.host_address()), db.schema(), effects).text(), {"run"},
      {}, link.exec_prefix());
  ASSERT_TRUE(daemon.wait_ready(30s)) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0);
  // The daemon's sessions come through the link, so the blackhole cuts them all.
  EXPECT_EQ(db.query("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                     "'pgjobd%' AND client_addr IS DISTINCT FROM " +
                     sql_literal(link.peer_address()) + "::inet"),
            "0");
  insert_stall_jobs(db, kJobs);
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") >= 80; }, 30s)) << db.summary();
  ReadinessTimeline readiness(port, &link);
  ASSERT_TRUE(readiness.first_readyz(200, Clock::now(), 10s));

  const std::size_t log_before = daemon.log().size();
  Blackhole blackhole(link, method);
  const auto cut_at = Clock::now();
  const std::set<std::int64_t> in_flight = db.ids("status = 'running'");
  const auto not_ready = readiness.first_readyz(503, cut_at, 30s);
  const auto logged = first_log_line(
      daemon, log_before,
      {"no answer from the database", "claim failed", "heartbeat failed", "cannot write"}, 30s);
  const auto abandoned = first_log_line(daemon, log_before, {"(database.call_timeout)"}, 30s);
  // The outage's length is the point: longer than the lease, so leases lapse and the
  // sessions cut by the deadlines must be opened anew once the path is back.
  std::this_thread::sleep_until(cut_at + kBlackholeLength);
  const std::int64_t done_at_lift = db.count("status = 'done'");
  blackhole.lift();
  const auto lifted_at = Clock::now();

  const bool claims_again =
      wait_until([&] { return db.count("status = 'done'") > done_at_lift; }, 60s);
  const double first_done_after = seconds_since(lifted_at);
  const bool all_done = wait_until([&] { return db.count("status = 'done'") == kJobs; }, 60s);
  const double all_done_after = seconds_since(lifted_at);
  const auto ready_again = readiness.first_readyz(200, lifted_at, 30s);
  readiness.stop();
  std::printf(
      "[ blackhole ] %s for %.1f s: /readyz 503 after %.2f s, first log line after %.2f s "
      "(\"%s\"), call_timeout logged after %.2f s; after the lift: a job done again after "
      "%.2f s, all %d done after %.2f s, /readyz 200 after %.2f s; %zu in flight at the "
      "cut, %d ran twice, %s rescued; first 503 body: %s\n",
      Blackhole::describe(method), seconds_between(cut_at, lifted_at),
      not_ready ? seconds_between(cut_at, not_ready->at) : -1.0,
      logged ? seconds_between(cut_at, logged->at) : -1.0, logged ? logged->line.c_str() : "",
      abandoned ? seconds_between(cut_at, abandoned->at) : -1.0, first_done_after, kJobs,
      all_done_after, ready_again ? seconds_between(lifted_at, ready_again->at) : -1.0,
      in_flight.size(), stall_duplicates(effects), rescued_jobs(db).c_str(),
      not_ready ? not_ready->readyz_body.c_str() : "");

  ASSERT_TRUE(not_ready) << "/readyz never said not ready while no packet got through";
  EXPECT_LE(seconds_between(cut_at, not_ready->at), kStallDetectionBoundSeconds)
      << readiness.not_ready_bodies(cut_at, lifted_at);
  EXPECT_TRUE(contains(not_ready->readyz_body, "no answer from the database") ||
              contains(not_ready->readyz_body, "connection"))
      << not_ready->readyz_body;
  ASSERT_TRUE(logged) << "nothing logged while no packet got through";
  EXPECT_LE(seconds_between(cut_at, logged->at), kStallDetectionBoundSeconds) << logged->line;
  EXPECT_TRUE(abandoned) << "no call was logged as abandoned at database.call_timeout";

  ASSERT_TRUE(claims_again) << db.summary() << "\n" << daemon.log();
  ASSERT_TRUE(all_done) << db.summary() << "\n" << daemon.log();
  EXPECT_TRUE(ready_again) << "/readyz still not ready 30 s after the path came back:\n"
                           << readiness.not_ready_bodies(lifted_at, Clock::now());
  EXPECT_TRUE(daemon.running());
  EXPECT_EQ(count_occurrences(daemon.log(), "pgjobd ready"), 1) << "the engine restarted";
  expect_every_job_done(db, effects, kJobs);
  // Only a job the daemon held when the path broke can run again (its lease lapsed).
  for (const auto& [id, n] : id_counts(effects)) {
    if (n > 1) {
      EXPECT_TRUE(in_flight.contains(id)) << "job " << id << " ran " << n << " times";
    }
  }
  stop_daemon(daemon);
}

}  // namespace
}  // namespace pgjobd::testing
