// The http handler's requests in the real binary, against a service that never answers:
// 64 requests in flight at once on 64 workers, each ending by its own timeout; a cancel and
// a drain each end a request in flight at once (one transfer thread drives them all, and a
// stop wakes it; src/handlers/http_handler.cpp).

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/silent_server.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string silent_handler(const SilentServer& silent, const std::string& timeout) {
  return "{http: {url: " + yaml_quote(silent.url()) + "}, timeout: " + timeout + "}";
}

// 64 jobs on 64 workers are all running at once (none waits for another's request), and
// all end together by their 1 s timeout, each as a timeout.
TEST(HttpTransfersE2E, SixtyFourRequestsToASilentServiceAllTimeOutTogether) {
  TestSchema schema;
  const SilentServer silent;
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 64}").handler("silent", silent_handler(silent, "1s"));
  schema.exec(
      "INSERT INTO {jobs} (type, max_attempts) SELECT 'silent', 1 FROM generate_series(1, 64)");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'running'") == 64; }, 15s))
      << table_summary(schema);
  const auto all_running = Clock::now();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 64; }, 30s))
      << table_summary(schema);
  EXPECT_LT(Clock::now() - all_running, 10s);  // one after another: over a minute
  EXPECT_EQ(schema.count("status = 'dead' AND last_error LIKE 'timeout after 1000ms: %'"), 64)
      << table_summary(schema);
  stop_daemon(daemon);
}

// A daemon with `section` set to `flow_map`, running one job whose request the silent
// service holds for its whole 60 s timeout.
struct OneRequestInFlight {
  OneRequestInFlight(const std::string& section, const std::string& flow_map) {
    DaemonYaml yaml(schema.name());
    yaml.set(section, flow_map).handler("silent", silent_handler(silent, "60s"));
    daemon = std::make_unique<DaemonProcess>(yaml.text());
    EXPECT_TRUE(daemon->wait_ready()) << daemon->log();
    id = schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('silent', 5) RETURNING id");
    EXPECT_TRUE(wait_until([&] { return schema.count("status = 'running'") == 1; }, 15s))
        << table_summary(schema);
  }
  TestSchema schema;
  const SilentServer silent;
  std::unique_ptr<DaemonProcess> daemon;
  std::string id;
};

// pgjobd_cancel ends a request in flight within 2 s (the NOTIFY, then the transfer thread's
// wake-up).
TEST(HttpTransfersE2E, ACancelEndsARequestInFlight) {
  OneRequestInFlight run("lease", "{duration: 60s}");
  const auto asked = Clock::now();
  run.schema.query("SELECT " + quote_identifier(run.schema.name()) + ".pgjobd_cancel(" + run.id +
                   ", 'no longer wanted')");
  ASSERT_TRUE(wait_until([&] { return run.schema.count("status = 'cancelled'") == 1; }, 15s))
      << table_summary(run.schema);
  EXPECT_LT(Clock::now() - asked, 2s);
  EXPECT_EQ(
      run.schema.query("SELECT attempts || ' ' || last_error FROM {jobs} WHERE id = " + run.id),
      "1 cancelled: no longer wanted");
  stop_daemon(*run.daemon);
}

// A drain whose shutdown timeout passes stops the request in flight, hands its job back
// without counting the attempt, and exits 0 at once rather than after the 60 s timeout.
TEST(HttpTransfersE2E, ADrainReleasesARequestInFlight) {
  OneRequestInFlight run("shutdown", "{timeout: 500ms}");
  const auto asked = Clock::now();
  run.daemon->signal(SIGTERM);
  EXPECT_EQ(run.daemon->wait_for_exit(15s), 0) << run.daemon->log();
  EXPECT_LT(Clock::now() - asked, 5s);
  EXPECT_EQ(run.schema.query("SELECT status || ' ' || attempts FROM {jobs}"), "pending 0")
      << table_summary(run.schema);
}

}  // namespace
}  // namespace pgjobd::testing
