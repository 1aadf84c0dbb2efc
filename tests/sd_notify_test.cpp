// Unit tests for SystemdNotifier against a real AF_UNIX datagram socket standing in for
// systemd: exact message contents, abstract sockets, disabled modes and the watchdog thread.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/notify_sink.hpp"
#include "systemd/sd_notify.hpp"

namespace pgjobd {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

using testing::Datagram;
using testing::NotifySink;
using testing::ScopedEnv;

std::int64_t monotonic_usec() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
}

std::string mine() { return std::to_string(::getpid()); }

TEST(SystemdNotifier, ReadySendsStatusAndMainPidFromThisProcess) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", std::nullopt},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  EXPECT_TRUE(notifier.enabled());
  notifier.ready("claiming from 2 queues");
  const auto datagram = sink.receive();
  ASSERT_TRUE(datagram);
  EXPECT_EQ(datagram->text, "READY=1\nSTATUS=claiming from 2 queues\nMAINPID=" + mine());
  // What NotifyAccess=main checks: the kernel-reported sender is the main process.
  EXPECT_EQ(datagram->sender, ::getpid());
}

TEST(SystemdNotifier, StatusStoppingAndReloadingSendExactMessages) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", std::nullopt},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  notifier.status("3/16 workers busy");
  EXPECT_EQ(sink.receive_text(), "STATUS=3/16 workers busy");
  notifier.stopping("draining 3 running jobs");
  EXPECT_EQ(sink.receive_text(), "STOPPING=1\nSTATUS=draining 3 running jobs");
  notifier.extend_timeout(std::chrono::seconds(45));
  EXPECT_EQ(sink.receive_text(), "EXTEND_TIMEOUT_USEC=45000000");

  const std::int64_t before = monotonic_usec();
  notifier.reloading("reloading configuration");
  const std::int64_t after = monotonic_usec();
  const std::string text = sink.receive_text();
  const std::string prefix = "RELOADING=1\nSTATUS=reloading configuration\nMONOTONIC_USEC=";
  ASSERT_EQ(text.substr(0, prefix.size()), prefix) << text;
  const std::string number = text.substr(prefix.size());
  ASSERT_FALSE(number.empty());
  ASSERT_EQ(number.find_first_not_of("0123456789"), std::string::npos) << number;
  const std::int64_t stamp = std::stoll(number);
  EXPECT_GE(stamp, before);
  EXPECT_LE(stamp, after);
}

TEST(SystemdNotifier, AbstractSocket) {
  NotifySink sink(NotifySink::Kind::kAbstract);
  ASSERT_EQ(sink.notify_socket()[0], '@');
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", std::nullopt},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  EXPECT_TRUE(notifier.enabled());
  notifier.ready("up");
  EXPECT_EQ(sink.receive_text(), "READY=1\nSTATUS=up\nMAINPID=" + mine());
  notifier.stopping("bye");
  EXPECT_EQ(sink.receive_text(), "STOPPING=1\nSTATUS=bye");
}

TEST(SystemdNotifier, ValuesCannotInjectAssignments) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", std::nullopt},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  notifier.status("line one\nREADY=1\r\nline three");
  EXPECT_EQ(sink.receive_text(), "STATUS=line one READY=1  line three");
  notifier.stopping(std::string("nul\0byte", 8));
  EXPECT_EQ(sink.receive_text(), "STOPPING=1\nSTATUS=nul byte");
}

TEST(SystemdNotifier, SanitizeKeepsUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(SystemdNotifier::sanitize_value("plain"), "plain");
  EXPECT_EQ(SystemdNotifier::sanitize_value("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\x98"),
            "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\x98");
  EXPECT_EQ(SystemdNotifier::sanitize_value("bad \xff byte"), "bad ? byte");
  EXPECT_EQ(SystemdNotifier::sanitize_value("cut \xc3"), "cut ?");
  EXPECT_EQ(SystemdNotifier::sanitize_value("overlong \xc0\xaf"), "overlong ??");
  EXPECT_EQ(SystemdNotifier::sanitize_value("surrogate \xed\xa0\x80"), "surrogate ???");
  EXPECT_EQ(SystemdNotifier::sanitize_value("nonchar \xef\xbf\xbe"), "nonchar ???");
}

TEST(SystemdNotifier, LongStatusIsCutAtACharacterBoundary) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", std::nullopt},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  std::string long_status = "x";
  for (int i = 0; i < 5000; ++i) long_status += "\xc3\xa9";  // é, two bytes
  notifier.status(long_status);
  const std::string text = sink.receive_text();
  EXPECT_LT(text.size(), 4096u);  // systemd ignores a datagram of 4 KiB or more
  const std::string value = text.substr(std::string("STATUS=").size());
  EXPECT_EQ(value.size(), SystemdNotifier::kMaxValueBytes - 1);  // the next é would not fit
  EXPECT_EQ(SystemdNotifier::sanitize_value(value), value);      // still valid UTF-8
}

TEST(SystemdNotifier, DisabledWhenNotifySocketUnset) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{
      {"NOTIFY_SOCKET", std::nullopt}, {"WATCHDOG_USEC", "100000"}, {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  EXPECT_FALSE(notifier.enabled());
  EXPECT_EQ(notifier.watchdog_interval().count(), 0);
  std::atomic<int> checks{0};
  notifier.start_watchdog([&] {
    ++checks;
    return true;
  });
  notifier.ready("up");
  notifier.status("s");
  notifier.reloading("r");
  notifier.stopping("x");
  EXPECT_FALSE(sink.receive(milliseconds(200)));
  EXPECT_EQ(checks.load(), 0);
}

TEST(SystemdNotifier, UnusableNotifySocketDisablesIt) {
  for (const char* value : {"", "relative/notify", "@", "vsock:2:1234"}) {
    ScopedEnv env{{"NOTIFY_SOCKET", value}};
    EXPECT_FALSE(SystemdNotifier().enabled()) << value;
  }
  const std::string too_long = "/" + std::string(sizeof(sockaddr_un::sun_path), 'a');
  ScopedEnv env{{"NOTIFY_SOCKET", too_long}};
  EXPECT_FALSE(SystemdNotifier().enabled());
}

TEST(SystemdNotifier, SendErrorsAreIgnored) {
  const std::string missing =
      (std::filesystem::temp_directory_path() / ("pgjobd-sdn-missing-" + mine()) / "notify")
          .string();
  ScopedEnv env{
      {"NOTIFY_SOCKET", missing}, {"WATCHDOG_USEC", std::nullopt}, {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  EXPECT_TRUE(notifier.enabled());
  EXPECT_NO_THROW(notifier.ready("up"));
  EXPECT_NO_THROW(notifier.status("s"));
  EXPECT_NO_THROW(notifier.reloading("r"));
  EXPECT_NO_THROW(notifier.stopping("x"));
}

TEST(SystemdNotifier, WatchdogPingsEveryHalfInterval) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "100000"},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  EXPECT_EQ(notifier.watchdog_interval(), milliseconds(50));
  const auto start = Clock::now();
  notifier.start_watchdog([] { return true; });
  int pings = 0;
  while (pings < 3 && Clock::now() - start < milliseconds(1000)) {
    const auto datagram = sink.receive(milliseconds(100));
    if (!datagram) continue;
    EXPECT_EQ(datagram->text, "WATCHDOG=1");
    ++pings;
  }
  EXPECT_GE(pings, 3);
}

TEST(SystemdNotifier, WatchdogStopsPingingWhileUnhealthyAndResumes) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "100000"},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  std::mutex mutex;
  std::condition_variable checked;
  bool healthy = true;
  int checks = 0;
  notifier.start_watchdog([&] {
    std::lock_guard lock(mutex);
    ++checks;
    checked.notify_all();
    return healthy;
  });
  EXPECT_EQ(sink.receive_text(), "WATCHDOG=1");

  // Turn unhealthy, then wait for a check that saw it: every ping from an earlier, healthy
  // check has been sent by then, so once those are drained the socket must stay silent.
  {
    std::unique_lock lock(mutex);
    healthy = false;
    const int seen = checks;
    ASSERT_TRUE(checked.wait_for(lock, milliseconds(2000), [&] { return checks > seen; }));
  }
  sink.drain();
  EXPECT_FALSE(sink.receive(milliseconds(300)));  // six intervals without a ping

  {
    std::lock_guard lock(mutex);
    healthy = true;
  }
  EXPECT_EQ(sink.receive_text(), "WATCHDOG=1");
}

TEST(SystemdNotifier, WatchdogPidOfAnotherProcessDisablesIt) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "100000"},
                {"WATCHDOG_PID", std::to_string(::getppid())}};
  SystemdNotifier notifier;
  EXPECT_TRUE(notifier.enabled());
  EXPECT_EQ(notifier.watchdog_interval().count(), 0);
  std::atomic<int> checks{0};
  notifier.start_watchdog([&] {
    ++checks;
    return true;
  });
  EXPECT_FALSE(sink.receive(milliseconds(200)));
  EXPECT_EQ(checks.load(), 0);
}

TEST(SystemdNotifier, WatchdogPidOfThisProcessEnablesIt) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "30000000"},
                {"WATCHDOG_PID", mine()}};
  SystemdNotifier notifier;
  EXPECT_EQ(notifier.watchdog_interval(), std::chrono::seconds(15));
  notifier.start_watchdog([] { return true; });
  EXPECT_EQ(sink.receive_text(), "WATCHDOG=1");  // the first ping goes out at once
}

TEST(SystemdNotifier, InvalidWatchdogUsecDisablesIt) {
  for (const char* value : {"", "0", "abc", "-5", "100ms", "99999999999999999999999"}) {
    ScopedEnv env{{"NOTIFY_SOCKET", "/run/pgjobd-test-not-used"},
                  {"WATCHDOG_USEC", value},
                  {"WATCHDOG_PID", std::nullopt}};
    EXPECT_EQ(SystemdNotifier().watchdog_interval().count(), 0) << value;
  }
}

TEST(SystemdNotifier, DestructionStopsTheWatchdogPromptly) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "60000000"},  // a ping every 30 s
                {"WATCHDOG_PID", std::nullopt}};
  std::optional<SystemdNotifier> notifier;
  notifier.emplace();
  notifier->start_watchdog([] { return true; });
  ASSERT_EQ(sink.receive_text(), "WATCHDOG=1");  // the thread now waits 30 s for its next ping
  const auto start = Clock::now();
  notifier.reset();
  const auto destruction = Clock::now() - start;
  EXPECT_LT(destruction, milliseconds(500));
}

TEST(SystemdNotifier, StartWatchdogAgainReplacesTheCallback) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "100000"},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  std::atomic<int> first{0};
  std::atomic<int> second{0};
  notifier.start_watchdog([&] { return ++first, true; });
  ASSERT_EQ(sink.receive_text(), "WATCHDOG=1");
  notifier.start_watchdog([&] { return ++second, true; });
  const int first_after_restart = first.load();
  ASSERT_EQ(sink.receive_text(), "WATCHDOG=1");
  sink.drain();
  EXPECT_EQ(sink.receive_text(), "WATCHDOG=1");
  EXPECT_EQ(first.load(), first_after_restart);
  EXPECT_GE(second.load(), 1);
  notifier.stop_watchdog();
  sink.drain();
  EXPECT_FALSE(sink.receive(milliseconds(200)));
}

// run_daemon holds its watchdog in a ScopedWatchdog: a drain that throws leaves the scope
// by exception, and the thread, which calls into the engine, must be gone before the
// engine is.
TEST(SystemdNotifier, ScopedWatchdogEndsItsThreadWhenLeftByAnException) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "20000"},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  std::atomic<int> checks{0};
  try {
    const ScopedWatchdog watchdog(notifier, [&] { return ++checks, true; });
    ASSERT_EQ(sink.receive_text(), "WATCHDOG=1");
    throw std::runtime_error("the drain failed");
  } catch (const std::runtime_error&) {
  }
  const int checks_at_exit = checks.load();
  sink.drain();
  EXPECT_FALSE(sink.receive(milliseconds(200)));  // twenty intervals without a ping
  EXPECT_EQ(checks.load(), checks_at_exit);
}

TEST(SystemdNotifier, StatusFromManyThreadsWhileTheWatchdogRuns) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "20000"},
                {"WATCHDOG_PID", std::nullopt}};
  SystemdNotifier notifier;
  notifier.start_watchdog([] { return true; });
  std::atomic<bool> done{false};
  int statuses = 0;
  std::thread reader([&] {
    while (!done || statuses < 40) {
      const auto datagram = sink.receive(milliseconds(2000));
      if (!datagram) break;
      if (datagram->text.rfind("STATUS=worker ", 0) == 0) ++statuses;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) notifier.status("worker " + std::to_string(t));
    });
  }
  for (auto& writer : writers) writer.join();
  done = true;
  reader.join();
  EXPECT_EQ(statuses, 40);
}

// libsystemd reads NOTIFY_SOCKET at every send: the notifier must leave the variables in
// the environment (children never get them: exec_environment_test).
TEST(SystemdNotifier, LeavesTheEnvironmentAsItFoundIt) {
  NotifySink sink(NotifySink::Kind::kPath);
  ScopedEnv env{{"NOTIFY_SOCKET", sink.notify_socket()},
                {"WATCHDOG_USEC", "30000000"},
                {"WATCHDOG_PID", mine()}};
  SystemdNotifier notifier;
  EXPECT_STREQ(std::getenv("NOTIFY_SOCKET"), sink.notify_socket().c_str());
  EXPECT_STREQ(std::getenv("WATCHDOG_USEC"), "30000000");
  EXPECT_STREQ(std::getenv("WATCHDOG_PID"), mine().c_str());
  notifier.status("still here");
  EXPECT_EQ(sink.receive_text(), "STATUS=still here");
}

}  // namespace
}  // namespace pgjobd
