// MaintenanceLoop: the tasks sharing a thread and a session run when due, in their order,
// wake early when one asks, and finish in the reverse order on a clean exit, unless the
// last call failed.

#include "engine/maintenance_loop.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pgjobd/duration.hpp"
#include "store/db_error.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::wait_until;
using std::chrono::seconds;

// What the scripted tasks did, in order ("a run", "b finish"), from the loop's thread.
class TaskLog {
 public:
  void add(std::string entry) {
    std::lock_guard lock(mutex_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> entries() const {
    std::lock_guard lock(mutex_);
    return entries_;
  }
  int count(const std::string& entry) const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count(entries_.begin(), entries_.end(), entry));
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> entries_;
};

// Due `first_after` after the loop starts, then every `every`; its call fails while
// `failing` is set. request() makes it due at once.
class ScriptedTask final : public MaintenanceTask {
 public:
  ScriptedTask(std::string name, TaskLog& log, Millis first_after, Millis every)
      : name_(std::move(name)), log_(log), first_after_(first_after), every_(every) {}

  void request() {
    requested_ = true;
    wake_loop();
  }
  void set_failing(bool failing) { failing_ = failing; }

  void begin(Clock::time_point now) override { next_ = now + first_after_; }
  Clock::time_point due() const override { return requested_ ? Clock::time_point{} : next_; }
  void run(Clock::time_point now, const std::stop_token& /*stop*/,
           MaintenanceCalls& calls) override {
    requested_ = false;
    calls.guarded(name_.c_str(), [&] {
      log_.add(name_ + " run");
      if (failing_) throw DbError("no answer", "", true);
    });
    next_ = now + every_;
  }
  void finish(MaintenanceCalls& calls) override {
    calls.guarded(name_.c_str(), [&] { log_.add(name_ + " finish"); });
  }

 private:
  const std::string name_;
  TaskLog& log_;
  const Millis first_after_;
  const Millis every_;
  Clock::time_point next_{};
  std::atomic<bool> requested_{false};
  std::atomic<bool> failing_{false};
};

class MaintenanceLoopTest : public ::testing::Test {
 protected:
  ScriptedTask& add(const std::string& name, Millis first_after, Millis every) {
    return loop_.add(std::make_unique<ScriptedTask>(name, log_, first_after, every));
  }

  TaskLog log_;
  Metrics metrics_{{"default"}, {}};
  Health health_;
  MaintenanceLoop loop_{metrics_, health_};  // last: stopped before what its tasks use
};

TEST_F(MaintenanceLoopTest, TasksRunInTheirOrderAndFinishInTheReverseOrder) {
  add("a", Millis(0), Millis(3600000));
  add("b", Millis(0), Millis(3600000));
  loop_.start();
  ASSERT_TRUE(wait_until([&] { return log_.count("b run") == 1; }, seconds(20)));
  loop_.stop();
  EXPECT_EQ(log_.entries(), (std::vector<std::string>{"a run", "b run", "b finish", "a finish"}));
  loop_.stop();  // safe twice, finishes once
  EXPECT_EQ(log_.count("a finish"), 1);
}

// Against a database that stopped answering, the courtesies of a clean exit would each
// cost a connect timeout: skipped. The failure is shown on /readyz meanwhile.
TEST_F(MaintenanceLoopTest, AFailedLastCallSkipsTheFinish) {
  add("a", Millis(0), Millis(3600000)).set_failing(true);
  loop_.start();
  ASSERT_TRUE(wait_until([&] { return log_.count("a run") == 1; }, seconds(20)));
  EXPECT_TRUE(wait_until([&] { return !health_.problems().empty(); }, seconds(20)));
  EXPECT_NE(health_.problems().find("database: no answer"), std::string::npos)
      << health_.problems();
  loop_.stop();
  EXPECT_EQ(log_.count("a finish"), 0);
}

// A task asks for its run now (a reload, a NOTIFY) rather than at its next interval, an
// hour away: the loop wakes for it, and the others keep their own schedules.
TEST_F(MaintenanceLoopTest, ARequestWakesTheLoopForThatTaskAlone) {
  ScriptedTask& asked = add("asked", Millis(3600000), Millis(3600000));
  add("other", Millis(0), Millis(3600000));
  loop_.start();
  ASSERT_TRUE(wait_until([&] { return log_.count("other run") == 1; }, seconds(20)));
  asked.request();
  ASSERT_TRUE(wait_until([&] { return log_.count("asked run") == 1; }, seconds(20)));
  asked.request();
  ASSERT_TRUE(wait_until([&] { return log_.count("asked run") == 2; }, seconds(20)));
  EXPECT_EQ(log_.count("other run"), 1);
}

}  // namespace
}  // namespace pgjobd
