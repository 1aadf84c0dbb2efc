// SIGTERM ends the daemon within its documented bound whatever the database does: here every
// process of the database server is frozen (SIGSTOP) while jobs run, so each statement the
// drain sends waits forever. The daemon exits with its documented code, and once the server
// is thawed a second daemon finishes every job, none dead.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/private_cluster.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Every process of a private cluster stopped with SIGSTOP, the postmaster first (so it
// forks no new backend meanwhile), and continued whatever happens to the test.
class FrozenCluster {
 public:
  explicit FrozenCluster(const PrivateCluster& cluster) {
    const std::string pid_file = read_text_file(cluster.dir() + "/data/postmaster.pid");
    const pid_t postmaster = static_cast<pid_t>(std::stol(pid_file));
    ::kill(postmaster, SIGSTOP);
    pids_.push_back(postmaster);
    for (const pid_t child : child_pids(postmaster)) {
      ::kill(child, SIGSTOP);
      pids_.push_back(child);
    }
  }
  ~FrozenCluster() { thaw(); }
  FrozenCluster(const FrozenCluster&) = delete;
  FrozenCluster& operator=(const FrozenCluster&) = delete;

  void thaw() {
    for (const pid_t pid : pids_) ::kill(pid, SIGCONT);
    pids_.clear();
  }
  std::size_t processes() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

bool documented_shutdown_code(int code) {
  return code == 3 /* the bound expired */ || (code >= 11 && code <= 109) /* 10 + unwritten */;
}

TEST(ShutdownBoundE2E, SigtermEndsTheDaemonWithinItsBoundWhileTheDatabaseIsFrozen) {
  constexpr int kJobs = 60;
  PrivateCluster cluster;
  ClusterSession db(cluster.url());
  db.create_schema();
  TempDir dir;
  const std::string effects = dir.file("effects");
  DaemonYaml yaml(db.schema());
  yaml.set("database", "{url: " + yaml_quote(cluster.url()) + ", schema: " + db.schema() + "}")
      .set("worker", "{concurrency: 4}")
      .set("lease", "{duration: 2s}")
      .set("shutdown", "{timeout: 2s}")
      .shell_handler("work", "echo $PGJOBD_JOB_ID >> " + shell_quote(effects) + "; sleep 0.2",
                     "kill_grace: 1s");
  // shutdown.timeout 2s + (kill_grace 1s + 1s) + the flush, min(lease 2s, 10s) + 10s.
  const auto bound = 16s;
  db.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, " +
          std::to_string(kJobs) + ")");
  DaemonProcess first(yaml.text());
  ASSERT_TRUE(first.wait_ready()) << first.log();
  ASSERT_TRUE(wait_until(
      [&] { return db.count("status = 'done'") >= 8 && db.count("status = 'running'") > 0; }, 30s))
      << db.summary();

  Clock::duration took{};
  std::optional<int> code;
  {
    FrozenCluster frozen(cluster);
    ASSERT_GT(frozen.processes(), 1u);
    first.signal(SIGTERM);
    const auto signalled = Clock::now();
    // Generous for a loaded machine; without the bound the daemon waited for minutes.
    code = first.wait_for_exit(bound + 10s);
    took = Clock::now() - signalled;
  }  // thawed
  ASSERT_TRUE(code.has_value()) << "still running " << bound + 10s << " after SIGTERM\n"
                                << first.log();
  std::printf("[ frozen database ] SIGTERM to exit: %.2f s (bound %lld s), exit code %d\n",
              std::chrono::duration<double>(took).count(), static_cast<long long>(bound.count()),
              *code);
  std::printf("%s\n", first.log().c_str());  // TEMP
  EXPECT_NE(first.log().find("the process ends within 16s"), std::string::npos) << first.log();
  EXPECT_TRUE(documented_shutdown_code(*code)) << *code << "\n" << first.log();
  if (*code == 3) {
    EXPECT_NE(first.log().find("still waiting for"), std::string::npos) << first.log();
  }

  // What the first daemon left running is rescued once its leases expire.
  DaemonProcess second(yaml.text());
  ASSERT_TRUE(second.wait_ready()) << second.log();
  EXPECT_TRUE(wait_until([&] { return db.count("status = 'done'") == kJobs; }, 60s))
      << db.summary() << "\n"
      << second.log();
  EXPECT_EQ(db.count("status = 'dead'"), 0) << db.summary();
  stop_daemon(second);
}

}  // namespace
}  // namespace pgjobd::testing
