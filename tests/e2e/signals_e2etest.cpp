// End-to-end: the daemon takes only the signals it handles (TERM, INT, HUP); any other
// signal keeps its default action and cannot stop TERM and HUP from being handled. A
// SIGHUP reloads only while the daemon runs: systemd hears READY=1 once start-up completed
// and after each reload, never while starting or draining.

#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/notify_sink.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

// Every datagram the daemon sent, in order (call it once the daemon has exited).
std::vector<std::string> notifications_sent(NotifySink& sink) {
  std::vector<std::string> texts;
  while (const auto datagram = sink.receive(0ms)) texts.push_back(datagram->text);
  return texts;
}

std::string joined(const std::vector<std::string>& texts) {
  std::string all;
  for (const std::string& text : texts) all += "[" + text + "] ";
  return all;
}

bool is_ready(const std::string& text) { return text.rfind("READY=1", 0) == 0; }

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

TEST(SignalsE2E, SighupWhileStartingIsIgnoredAndSendsNoReady) {
  NotifySink sink(NotifySink::Kind::kPath);
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("database",
           "{url: \"postgresql://pgjobd@127.0.0.1:1/pgjobd\", schema: " + schema.name() + "}");
  yaml.handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text(), {"run"}, {{"NOTIFY_SOCKET", sink.notify_socket()}});
  ASSERT_TRUE(daemon.wait_for_log("database not reachable")) << daemon.log();
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_for_log("SIGHUP ignored: the daemon is starting")) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(15s), 0) << daemon.log();
  const std::vector<std::string> sent = notifications_sent(sink);
  for (const std::string& text : sent) {
    EXPECT_FALSE(is_ready(text)) << "READY=1 before start-up completed: " << joined(sent);
    EXPECT_EQ(text.find("RELOADING=1"), std::string::npos) << joined(sent);
  }
}

TEST(SignalsE2E, SighupWhileRunningReloadsButWhileDrainingSendsNoReady) {
  NotifySink sink(NotifySink::Kind::kPath);
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("shutdown", "{timeout: 60s}");
  yaml.shell_handler("slow", "sleep 60", "kill_grace: 1s");
  DaemonProcess daemon(yaml.text(), {"run"}, {{"NOTIFY_SOCKET", sink.notify_socket()}});
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_for_log("configuration reloaded")) << daemon.log();
  schema.insert_jobs("slow", 1);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'running'") == 1; }, 15s));
  daemon.signal(SIGTERM);
  ASSERT_TRUE(daemon.wait_for_log("SIGTERM received: draining")) << daemon.log();
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_for_log("SIGHUP ignored: the daemon is draining")) << daemon.log();
  daemon.signal(SIGTERM);  // stop waiting for the job: it is released
  EXPECT_EQ(daemon.wait_for_exit(15s), 0) << daemon.log();

  const std::vector<std::string> sent = notifications_sent(sink);
  std::vector<std::string> states;  // the first line of each, but plain STATUS= lines
  for (const std::string& text : sent) {
    if (text.rfind("STATUS=", 0) != 0) states.push_back(text.substr(0, text.find('\n')));
  }
  // Start-up, one reload (RELOADING=1 ended by READY=1), the drain; nothing after it.
  const std::vector<std::string> expected = {"READY=1", "RELOADING=1", "READY=1", "STOPPING=1"};
  EXPECT_EQ(states, expected) << joined(sent);
}

}  // namespace
}  // namespace pgjobd::testing
