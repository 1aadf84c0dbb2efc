// End-to-end: nothing holds a daemon's exit after `drained` while clients hold connections to
// its listeners without sending on them (a browser's idle or preconnected socket to the
// dashboard, a scraper's stalled request to /metrics). civetweb's workers waited up to 2 s
// for such a client and mg_stop for them: /metrics' before `drained`, the dashboard's after
// it (issue 45: `drained` 25 ms after SIGTERM, then 1.2 s to exit; http/listener_stop.hpp).

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "support/daemon_process.hpp"
#include "support/listening_daemon.hpp"
#include "support/silent_client.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

long long ms(Clock::duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

// Generous for a loaded machine; each wait was up to 2 s.
constexpr long long kBoundMs = 500;

class ExitWithSilentClientsE2E : public ListeningDaemonTest {
 protected:
  // SIGTERM; the time until `drained` is logged, and from then until the exit (code 0).
  void stop(long long& to_drained, long long& to_exit) {
    const auto signalled = Clock::now();
    daemon_->signal(SIGTERM);
    ASSERT_TRUE(daemon_->wait_for_log("drained", 15s)) << daemon_->log();
    const auto drained = Clock::now();
    ASSERT_EQ(daemon_->wait_for_exit(15s), 0) << daemon_->log();
    to_drained = ms(drained - signalled);
    to_exit = ms(Clock::now() - drained);
    std::printf("[ silent clients ] SIGTERM to drained %lld ms, drained to exit %lld ms\n",
                to_drained, to_exit);
  }
};

// The dashboard stops alongside the drain and the process waits for it after `drained`.
TEST_F(ExitWithSilentClientsE2E, ExitsPromptlyAfterDrainedWithSilentDashboardClients) {
  const SilentClient idle(dashboard_, "");
  const SilentClient half(dashboard_, "GET / HTTP/1.1\r\nHost: te");
  ASSERT_TRUE(idle.connected() && half.connected());
  // civetweb hands accepted connections to its 4 workers in order: once a later request
  // is answered, a worker holds each silent connection.
  ASSERT_EQ(http_get(dashboard_, "/healthz").status, 200);
  long long to_drained = 0;
  long long to_exit = 0;
  stop(to_drained, to_exit);
  EXPECT_LT(to_exit, kBoundMs) << daemon_->log();
}

// /metrics stops as the drain's last step, before `drained`.
TEST_F(ExitWithSilentClientsE2E, DrainsPromptlyWithASilentScraper) {
  const SilentClient idle(metrics_, "");
  ASSERT_TRUE(idle.connected());
  // Likewise with its 2 workers: the other one answers this.
  ASSERT_EQ(http_get(metrics_, "/healthz").status, 200);
  const SilentClient half(metrics_, "GET /metrics HTTP/1.1\r\nHo");
  ASSERT_TRUE(half.connected());
  long long to_drained = 0;
  long long to_exit = 0;
  stop(to_drained, to_exit);
  EXPECT_LT(to_drained, kBoundMs) << daemon_->log();
  EXPECT_LT(to_exit, kBoundMs) << daemon_->log();
}

// `pgjobd ui`, the dashboard alone, likewise from SIGTERM to its exit.
TEST(ExitWithSilentClientsUiE2E, TheDashboardAloneExitsPromptly) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("ui", "{listen: \"127.0.0.1:0\"}");
  DaemonProcess ui(yaml.text(), {"ui"});
  const int port = ui.dashboard_port();
  ASSERT_GT(port, 0) << ui.log();
  const SilentClient idle(port, "");
  ASSERT_TRUE(idle.connected());
  ASSERT_EQ(http_get(port, "/healthz").status, 200);
  const auto signalled = Clock::now();
  ui.signal(SIGTERM);
  ASSERT_EQ(ui.wait_for_exit(15s), 0) << ui.log();
  const long long to_exit = ms(Clock::now() - signalled);
  std::printf("[ silent clients ] pgjobd ui: SIGTERM to exit %lld ms\n", to_exit);
  EXPECT_LT(to_exit, kBoundMs) << ui.log();
}

}  // namespace
}  // namespace pgjobd::testing
