// pgjobd_chaos: K real daemons on a private PostgreSQL cluster under random faults; proves
// at-least-once delivery ("no job lost") and that duplicates happen only to in-flight jobs.
//
// Run (as root, like the test suite: the cluster runs as the postgres user):
//   cmake --build build/release --target pgjobd pgjobd_chaos
//   build/release/tests/pgjobd_chaos --seconds 300 [--daemons 3] [--seed N] [--verbose]
// ctest runs a 20 s smoke of it (chaos_smoke).
//
// For --seconds N it starts a throwaway cluster (scripts/pg-cluster.sh), K daemons (lease 2s)
// whose exec handler appends "<job id> <daemon>" to a side-effect log, keeps enqueuing jobs,
// and every 0.5-3 s injects one fault: SIGKILL a daemon and restart it, SIGSTOP a daemon past
// its lease then SIGCONT it, pg_terminate_backend of every pgjobd session, or
// `pg_ctl restart -m fast`. At each fault it records the jobs that are running (in flight).
// Then it stops injecting and enqueuing, waits (bounded) until no job is pending, running or
// failed, and prints
//   faults injected N, jobs lost 0, duplicate runs D (all among in-flight jobs)
// where lost = jobs not done, or done without a side effect. Exit status 1 if any job was
// lost, a duplicate run was not of an in-flight job, a daemon exited by itself or did not
// drain cleanly (exit 0 on SIGTERM) at the end; 2 on a usage error.

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/private_cluster.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kLease{2000};

struct Options {
  int seconds = 60;
  int daemons = 3;
  unsigned seed = std::random_device{}();
  bool verbose = false;
};

void usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--seconds N] [--daemons K] [--seed S] [--verbose]\n", program);
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto number = [&](int low, int high) -> std::optional<long> {
      if (i + 1 >= argc) return std::nullopt;
      char* end = nullptr;
      const long value = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || value < low || value > high) return std::nullopt;
      return value;
    };
    std::optional<long> value;
    if (arg == "--seconds" && (value = number(1, 86400))) {
      options.seconds = static_cast<int>(*value);
    } else if (arg == "--daemons" && (value = number(1, 10))) {
      options.daemons = static_cast<int>(*value);
    } else if (arg == "--seed" && (value = number(0, 2147483647))) {
      options.seed = static_cast<unsigned>(*value);
    } else if (arg == "--verbose") {
      options.verbose = true;
    } else {
      return std::nullopt;
    }
  }
  return options;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Chaos {
 public:
  explicit Chaos(const Options& options)
      : options_(options), random_(options.seed), db_(cluster_.url()) {}

  // A run that ends early (an exception) must not leave a daemon frozen.
  ~Chaos() {
    for (auto& daemon : daemons_) {
      if (daemon) daemon->signal(SIGCONT);
    }
  }

  int run();

 private:
  std::string daemon_yaml(int index) const;
  void start_daemon(int index);
  void enqueue_loop(const std::stop_token& stop);
  void record_in_flight();
  void inject_one();
  void check_daemons_alive();
  void log(const std::string& text) const {
    if (options_.verbose) std::printf("[chaos %7.2fs] %s\n", seconds_since(began_), text.c_str());
  }
  int pick_daemon() { return std::uniform_int_distribution<int>(0, options_.daemons - 1)(random_); }
  milliseconds random_ms(int low, int high) {
    return milliseconds(std::uniform_int_distribution<int>(low, high)(random_));
  }

  const Options options_;
  std::mt19937 random_;
  const Clock::time_point began_ = Clock::now();
  PrivateCluster cluster_;
  ClusterSession db_;  // the fault thread's session (main thread)
  TempDir dir_;
  const std::string effects_ = dir_.file("effects");
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::set<std::int64_t> in_flight_;
  std::map<std::string, int> faults_;
  int unexpected_exits_ = 0;
  std::atomic<long> enqueue_failures_{0};
};

std::string Chaos::daemon_yaml(int index) const {
  // `sh -c SCRIPT NAME`: $0 is the daemon's name. 0 to 0.2 s of work after the side effect.
  const std::string script =
      "echo \"$PGJOBD_JOB_ID $0\" >> " + shell_quote(effects_) + "; sleep 0.$((PGJOBD_JOB_ID % 3))";
  return "database: {url: " + yaml_quote(cluster_.url()) + ", schema: " + db_.schema() +
         "}\n"
         "worker: {concurrency: 8}\n"
         "poll: {min_interval: 20ms, max_interval: 500ms}\n"
         "retry: {base: 100ms, max_delay: 2s, jitter: 0.1}\n"
         "lease: {duration: 2s}\n"
         "shutdown: {timeout: 5s}\n"
         "metrics: {listen: \"\"}\n"
         "log: {level: info}\n"
         "handlers:\n"
         "  work: {exec: [/bin/sh, -c, " +
         yaml_quote(script) + ", d" + std::to_string(index) + "], kill_grace: 1s}\n";
}

void Chaos::start_daemon(int index) {
  daemons_[static_cast<std::size_t>(index)] = nullptr;  // reaps a killed one first
  daemons_[static_cast<std::size_t>(index)] = std::make_unique<DaemonProcess>(daemon_yaml(index));
}

void Chaos::enqueue_loop(const std::stop_token& stop) {
  ClusterSession session(cluster_.url(), db_.schema());
  std::mt19937 random(options_.seed + 1);
  while (!stop.stop_requested()) {
    const int n = std::uniform_int_distribution<int>(5, 30)(random);
    try {
      // max_attempts well above what the faults can use up: a job dying of attempts
      // exhausted by rescues would be reported as lost.
      session.exec(
          "INSERT INTO {jobs} (type, max_attempts) SELECT 'work', 50 "
          "FROM generate_series(1, " +
          std::to_string(n) + ")");
    } catch (const std::exception&) {
      ++enqueue_failures_;  // the server is restarting: this batch was not enqueued
    }
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(50, 300)(random)));
  }
}

void Chaos::record_in_flight() {
  try {
    const auto running = db_.ids("status = 'running'");
    in_flight_.insert(running.begin(), running.end());
  } catch (const std::exception& e) {
    // Only during a restart; the snapshot right after it covers those jobs.
    log(std::string("cannot record the running jobs: ") + e.what());
  }
}

void Chaos::inject_one() {
  const int kind = std::uniform_int_distribution<int>(0, 3)(random_);
  record_in_flight();
  switch (kind) {
    case 0: {
      const int i = pick_daemon();
      log("SIGKILL d" + std::to_string(i) + " and restart it");
      daemons_[static_cast<std::size_t>(i)]->signal(SIGKILL);
      daemons_[static_cast<std::size_t>(i)]->wait_for_exit(10s);
      // A claim the daemon sent just before it died may still commit on the server.
      std::this_thread::sleep_for(300ms);
      record_in_flight();
      start_daemon(i);
      ++faults_["sigkill"];
      break;
    }
    case 1: {
      const int i = pick_daemon();
      const milliseconds frozen = kLease + random_ms(500, 2000);
      log("SIGSTOP d" + std::to_string(i) + " for " + std::to_string(frozen.count()) + "ms");
      daemons_[static_cast<std::size_t>(i)]->signal(SIGSTOP);
      std::this_thread::sleep_for(300ms);
      record_in_flight();  // claims that committed as it froze
      std::this_thread::sleep_for(frozen - 300ms);
      daemons_[static_cast<std::size_t>(i)]->signal(SIGCONT);
      ++faults_["sigstop"];
      break;
    }
    case 2: {
      int n = 0;
      try {
        n = db_.terminate_daemon_sessions();
      } catch (const std::exception& e) {
        log(std::string("terminate failed: ") + e.what());
      }
      log("terminated " + std::to_string(n) + " pgjobd sessions");
      ++faults_["terminate"];
      break;
    }
    default: {
      log("pg_ctl restart -m fast");
      cluster_.restart();
      record_in_flight();
      ++faults_["pg restart"];
      break;
    }
  }
}

void Chaos::check_daemons_alive() {
  for (std::size_t i = 0; i < daemons_.size(); ++i) {
    if (daemons_[i]->running()) continue;
    ++unexpected_exits_;
    std::printf("daemon d%zu exited by itself (code %d); its log ends:\n%s\n", i,
                daemons_[i]->exit_code().value_or(-1), daemons_[i]->log().c_str());
    start_daemon(static_cast<int>(i));
  }
}

int Chaos::run() {
  std::printf("pgjobd chaos: %d s, %d daemons, seed %u, cluster %s\n", options_.seconds,
              options_.daemons, options_.seed, cluster_.url().c_str());
  db_.create_schema();
  daemons_.resize(static_cast<std::size_t>(options_.daemons));
  for (int i = 0; i < options_.daemons; ++i) start_daemon(i);
  for (auto& daemon : daemons_) {
    if (!daemon->wait_ready(30s)) {
      std::printf("a daemon did not start:\n%s\n", daemon->log().c_str());
      return 1;
    }
  }
  std::jthread enqueuer([this](const std::stop_token& stop) { enqueue_loop(stop); });

  const auto deadline = Clock::now() + std::chrono::seconds(options_.seconds);
  int injected = 0;
  while (true) {
    const auto pause = random_ms(500, 3000);
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    inject_one();
    ++injected;
    check_daemons_alive();
  }
  std::this_thread::sleep_until(deadline);
  enqueuer.request_stop();
  enqueuer.join();
  check_daemons_alive();

  // Faults over: everything must finish. Rescues wait out a lease (and the leadership TTL
  // of a killed leader), then their retry backoff.
  const auto settle_start = Clock::now();
  const bool settled = wait_until(
      [&] { return db_.count("status IN ('pending', 'running', 'failed')") == 0; }, 120s);
  const double settle_seconds = seconds_since(settle_start);
  check_daemons_alive();
  // Every daemon must still drain cleanly (exit 0) after all it went through.
  for (auto& daemon : daemons_) daemon->signal(SIGTERM);
  int unclean_drains = 0;
  for (std::size_t i = 0; i < daemons_.size(); ++i) {
    const auto code = daemons_[i]->wait_for_exit(30s);
    if (code == 0) continue;
    ++unclean_drains;
    std::printf("daemon d%zu did not drain cleanly (exit %d); its log ends:\n%s\n", i,
                code.value_or(-1), daemons_[i]->log().c_str());
  }

  const auto runs = id_counts(effects_);
  const std::set<std::int64_t> all = db_.ids("true");
  const std::set<std::int64_t> done = db_.ids("status = 'done'");
  std::vector<std::int64_t> lost;
  for (const std::int64_t id : all) {
    if (!done.contains(id) || !runs.contains(id)) lost.push_back(id);
  }
  int duplicates = 0;
  std::vector<std::int64_t> not_in_flight;
  for (const auto& [id, n] : runs) {
    if (n < 2) continue;
    ++duplicates;
    if (!in_flight_.contains(id)) not_in_flight.push_back(id);
  }

  std::string kinds;
  for (const auto& [kind, n] : faults_)
    kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  std::printf(
      "faults: %s; %zu jobs (%zu done), %zu in flight at some fault, settled in %.1f s%s; "
      "%ld enqueue batches refused during outages; %d daemon(s) exited by themselves, %d "
      "did not drain cleanly\n",
      kinds.c_str(), all.size(), done.size(), in_flight_.size(), settle_seconds,
      settled ? "" : " (NOT settled within 120 s)", enqueue_failures_.load(), unexpected_exits_,
      unclean_drains);
  for (std::size_t i = 0; i < lost.size() && i < 20; ++i) {
    std::printf("lost: %s\n", db_.query("SELECT row_to_json(j)::text FROM {jobs} j WHERE id = " +
                                        std::to_string(lost[i]))
                                  .c_str());
  }
  std::string outside;
  for (std::size_t i = 0; i < not_in_flight.size() && i < 20; ++i) {
    outside += (outside.empty() ? "" : ", ") + std::to_string(not_in_flight[i]);
  }
  if (not_in_flight.empty()) {
    std::printf("faults injected %d, jobs lost %zu, duplicate runs %d (all among in-flight jobs)\n",
                injected, lost.size(), duplicates);
  } else {
    std::printf(
        "faults injected %d, jobs lost %zu, duplicate runs %d (%zu NOT among in-flight jobs: "
        "%s)\n",
        injected, lost.size(), duplicates, not_in_flight.size(), outside.c_str());
  }
  std::fflush(stdout);
  const bool ok = lost.empty() && not_in_flight.empty() && unexpected_exits_ == 0 &&
                  unclean_drains == 0 && settled;
  if (!ok || options_.verbose) {
    for (std::size_t i = 0; i < daemons_.size(); ++i) {
      std::printf("---- d%zu log (warnings and errors) ----\n", i);
      std::istringstream lines(daemons_[i]->log());
      for (std::string line; std::getline(lines, line);) {
        if (line.find(" warn ") != std::string::npos || line.find(" error ") != std::string::npos) {
          std::printf("%s\n", line.c_str());
        }
      }
    }
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace pgjobd::testing

int main(int argc, char** argv) {
  const auto options = pgjobd::testing::parse_options(argc, argv);
  if (!options) {
    pgjobd::testing::usage(argv[0]);
    return 2;
  }
  try {
    pgjobd::testing::Chaos chaos(*options);
    return chaos.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pgjobd_chaos: %s\n", e.what());
    return 1;
  }
}
