// End-to-end operations: systemd notifications on a real NOTIFY_SOCKET, live reload by
// SIGHUP (concurrency up and down, a rejected reload), and promtool on a live scrape.

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

// A bound AF_UNIX datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "bind " << path;
    }
  }
  ~NotifySocket() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  // Receives datagrams until one contains `text` (true) or `timeout` passes (false); every
  // datagram seen is appended to received().
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) continue;
      received_.emplace_back(buf, static_cast<std::size_t>(n));
      if (received_.back().find(text) != std::string::npos) return true;
    }
  }
  const std::vector<std::string>& received() const { return received_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> received_;
};

TEST(OperationsE2E, NotifiesSystemdReadyWatchdogAndStopping) {
  TestSchema schema;
  TempDir dir;
  NotifySocket systemd(dir.file("notify.sock"));
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text(), {"run"},
                       {{"NOTIFY_SOCKET", dir.file("notify.sock")}, {"WATCHDOG_USEC", "200000"}});
  ASSERT_TRUE(systemd.wait_for("READY=1", 15s)) << daemon.log();
  EXPECT_NE(systemd.received().back().find("STATUS=processing jobs"), std::string::npos)
      << systemd.received().back();
  EXPECT_NE(systemd.received().back().find("MAINPID=" + std::to_string(daemon.pid())),
            std::string::npos);
  // Pings every WATCHDOG_USEC / 2.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(systemd.wait_for("WATCHDOG=1", 2s)) << i;
  daemon.signal(SIGTERM);
  ASSERT_TRUE(systemd.wait_for("STOPPING=1", 10s)) << daemon.log();
  EXPECT_EQ(daemon.wait_for_exit(15s), 0);
}

TEST(OperationsE2E, SighupReloadNotifiesReloadingThenReady) {
  TestSchema schema;
  TempDir dir;
  NotifySocket systemd(dir.file("notify.sock"));
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text(), {"run"}, {{"NOTIFY_SOCKET", dir.file("notify.sock")}});
  ASSERT_TRUE(systemd.wait_for("READY=1", 15s)) << daemon.log();
  daemon.signal(SIGHUP);
  ASSERT_TRUE(systemd.wait_for("RELOADING=1", 10s)) << daemon.log();
  ASSERT_TRUE(systemd.wait_for("READY=1", 10s)) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(15s), 0);
}

// Rewrites the daemon's config file in place and sends SIGHUP.
void reload_with(DaemonProcess& daemon, const std::string& yaml) {
  std::ofstream(daemon.config_path(), std::ios::trunc) << yaml;
  daemon.signal(SIGHUP);
}

TEST(OperationsE2E, SighupRaisesAndLowersConcurrencyWithoutLosingOrRerunningJobs) {
  constexpr int kJobs = 240;
  TestSchema schema;
  TempDir dir;
  const std::string ran = dir.file("ran");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 2}")
      .shell_handler("work", "echo $PGJOBD_JOB_ID >> " + shell_quote(ran) + "; sleep 0.05");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.insert_jobs("work", kJobs);
  const auto running = [&] { return schema.count("status = 'running'"); };
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") >= 10; }, 30s));
  EXPECT_LE(running(), 2);

  reload_with(daemon, yaml.set("worker", "{concurrency: 8}").text());
  ASSERT_TRUE(daemon.wait_for_log("configuration reloaded: 8 worker(s)")) << daemon.log();
  EXPECT_TRUE(wait_until([&] { return running() >= 5; }, 10s)) << "concurrency did not rise";

  reload_with(daemon, yaml.set("worker", "{concurrency: 1}").text());
  ASSERT_TRUE(daemon.wait_for_log("configuration reloaded: 1 worker(s)")) << daemon.log();
  // Running jobs finish (none is killed); after that at most one runs at a time. The
  // table may show one more `running` row: a finished job whose `done` the completer
  // writes a millisecond after the next job was claimed.
  ASSERT_TRUE(wait_until([&] { return running() <= 1; }, 10s));
  for (int i = 0; i < 20; ++i) EXPECT_LE(running(), 2);

  reload_with(daemon, yaml.set("worker", "{concurrency: 16}").text());
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 60s));
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for_exit(15s), 0);
  const auto lines = read_lines(ran);
  EXPECT_EQ(lines.size(), static_cast<std::size_t>(kJobs)) << "a job ran twice or not at all";
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()).size(),
            static_cast<std::size_t>(kJobs));
  EXPECT_EQ(schema.count("attempts <> 1"), 0);
}

TEST(OperationsE2E, InvalidReloadKeepsTheOldConfig) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("metrics", "{listen: \"127.0.0.1:0\"}").handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0);
  DaemonYaml invalid = yaml;
  reload_with(daemon, invalid.set("worker", "{concurency: 3}").text());
  ASSERT_TRUE(daemon.wait_for_log("reload rejected")) << daemon.log();
  EXPECT_NE(daemon.log().find("worker.concurency"), std::string::npos) << daemon.log();
  // Still running with the old handlers.
  schema.insert_jobs("ping", 5);
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 5; }, 15s));
  const std::string metrics = http_get(port, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "pgjobd_config_reloads_total", {{"result", "rejected"}}), 1.0)
      << metrics;
  EXPECT_EQ(metric_value(metrics, "pgjobd_config_reloads_total", {{"result", "applied"}}), 0.0);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(15s), 0);
}

TEST(OperationsE2E, LiveScrapePassesPromtoolCheckMetrics) {
  if (::access("/usr/bin/promtool", X_OK) != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package `prometheus`; "
                    "scripts/install-deps.sh installs it for the test suite)";
  }
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("metrics", "{listen: \"127.0.0.1:0\"}")
      .handler("ping", "{builtin: noop}")
      .shell_handler("fail", "exit 3");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.insert_jobs("ping", 5);
  schema.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('fail', 1)");
  ASSERT_TRUE(wait_until([&] { return schema.count("status IN ('done', 'dead')") == 6; }, 15s));
  const HttpResponse scrape = http_get(daemon.metrics_port(), "/metrics");
  ASSERT_EQ(scrape.status, 200);
  TempDir dir;
  const std::string file = dir.write("metrics.txt", scrape.body);
  const std::string command = "promtool check metrics < " + file + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  const int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "") << "promtool lint findings:\n" << output;
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(15s), 0);
}

}  // namespace
}  // namespace pgjobd::testing
