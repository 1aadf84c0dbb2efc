// End-to-end: the daemon takes only the signals it handles (TERM, INT, HUP); any other
// signal keeps its default action and cannot stop TERM and HUP from being handled.

#include <gtest/gtest.h>
#include <signal.h>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

TEST(SignalsE2E, AnIgnoredSignalLeavesReloadAndDrainWorking) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text(), {"run"});
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  // Default action: ignore. Were it taken by the signal thread, it could end that thread.
  daemon.signal(SIGWINCH);
  daemon.signal(SIGURG);
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_for_log("SIGHUP received: reloading")) << daemon.log();
  ASSERT_TRUE(daemon.wait_for_log("configuration reloaded")) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(15s), 0) << daemon.log();
  EXPECT_NE(daemon.log().find("SIGTERM received: draining"), std::string::npos) << daemon.log();
}

// SIGUSR2 used to be the signal thread's private "finished" message: one from outside
// ended the thread silently, and SIGTERM and SIGHUP were never handled again. Now it has
// its default action, like any signal the daemon does not handle.
TEST(SignalsE2E, SigusrTwoHasItsDefaultAction) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text(), {"run"});
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  daemon.signal(SIGUSR2);
  EXPECT_EQ(daemon.wait_for_exit(15s), 128 + SIGUSR2) << daemon.log();
}

}  // namespace
}  // namespace pgjobd::testing
