#pragma once
// A thread and a database session shared by maintenance tasks. Each task owns one job and
// its schedule (the leadership, the daemon registry, the queue statistics, the limits sync,
// retention: Maintenance says which share a loop); the loop wakes when the first of them is
// due, or when one asks (a reload, a NOTIFY), and runs those due in the order they were
// added. Tasks on one loop wait for each other, so a task whose calls are long gets a loop,
// and a session, of its own.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <vector>

#include "engine/health.hpp"
#include "metrics/metrics.hpp"
#include "runtime/service.hpp"

namespace pgjobd {

// A loop's database calls: each failure logged, counted and shown on /readyz, the loop
// going on. Used on the loop's thread, and before start() on the thread that starts it.
class MaintenanceCalls {
 public:
  MaintenanceCalls(Metrics& metrics, Health& health) : metrics_(metrics), health_(health) {}

  // Runs one call, turning an exception into a warning ("<operation> failed: ..."), a
  // count (pgjobd_db_errors_total, or pgjobd_loop_errors_total{loop="maintenance"}) and
  // the "database" problem of /readyz, which any call that goes through clears.
  void guarded(const char* operation, const std::function<void()>& call);
  // The loop's last call failed.
  bool last_failed() const { return last_failed_; }

 private:
  Metrics& metrics_;
  Health& health_;
  bool last_failed_ = false;
};

class MaintenanceTask {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~MaintenanceTask() = default;
  // On the loop's thread when it starts: schedules the first run.
  virtual void begin(Clock::time_point now) = 0;
  // When the task is next due (a time already past: at once). Read by the loop's thread.
  virtual Clock::time_point due() const = 0;
  // Does what is due at `now` (the loop's wake-up), each database call through `calls`.
  virtual void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) = 0;
  // On the loop's way out, unless its last call failed (a courtesy such as a resign, which
  // against a database that stopped answering would cost a connect timeout on the way out,
  // and whose work expires by itself anyway). In the reverse order of the tasks.
  virtual void finish(MaintenanceCalls& /*calls*/) {}

  // Set by the loop the task is added to.
  void set_wake(std::function<void()> wake) { wake_ = std::move(wake); }

 protected:
  // From any thread: the loop asks due() again now rather than at the time it last read.
  void wake_loop() const {
    if (wake_) wake_();
  }

 private:
  std::function<void()> wake_;
};

class MaintenanceLoop final : public Service {
 public:
  MaintenanceLoop(Metrics& metrics, Health& health) : calls_(metrics, health) {}
  ~MaintenanceLoop() override;  // stop()
  MaintenanceLoop(const MaintenanceLoop&) = delete;
  MaintenanceLoop& operator=(const MaintenanceLoop&) = delete;

  // Before start(). The loop owns the task; the reference stays valid as long as the loop.
  template <typename Task>
  Task& add(std::unique_ptr<Task> task) {
    Task& added = *task;
    add_task(std::move(task));
    return added;
  }
  // The calls of this loop, for a task's first run made before start() (LimitsSync).
  MaintenanceCalls& calls() { return calls_; }

  void start() override;
  void request_stop() override;
  void join() override;  // after the tasks' finish()

 private:
  void add_task(std::unique_ptr<MaintenanceTask> task);
  void run(const std::stop_token& stop);
  void wake();

  MaintenanceCalls calls_;  // the loop's thread (and before start())
  std::vector<std::unique_ptr<MaintenanceTask>> tasks_;
  std::mutex mutex_;
  bool woken_ = false;  // a task's wake_loop(), not yet seen by the loop
  std::condition_variable_any wake_;
  ServiceThread thread_;  // last: joined before the members it uses go away
};

}  // namespace pgjobd
