// MaintenanceLoop: wakes for the first task due, runs those due, and finishes them on a
// clean exit.

#include "engine/maintenance_loop.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/loop_error.hpp"

namespace pgjobd {

void MaintenanceCalls::guarded(const char* operation, const std::function<void()>& call) {
  try {
    call();
    // Any statement that went through shows the database is back: /readyz recovers
    // within one rescue interval of an outage, not at the next statistics round.
    health_.clear("database");
    last_failed_ = false;
  } catch (const std::exception& e) {  // a DbError, or a bug: the call is lost, not the loop
    count_loop_error(&metrics_, "maintenance", operation, e);
    last_failed_ = true;
    health_.set_problem("database", e.what());
    spdlog::warn("{} failed: {}", operation, e.what());
  }
}

MaintenanceLoop::~MaintenanceLoop() { stop(); }

void MaintenanceLoop::add_task(std::unique_ptr<MaintenanceTask> task) {
  task->set_wake([this] { wake(); });
  tasks_.push_back(std::move(task));
}

void MaintenanceLoop::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}
void MaintenanceLoop::request_stop() { thread_.request_stop(); }
void MaintenanceLoop::join() { thread_.join(); }

void MaintenanceLoop::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  wake_.notify_all();
}

void MaintenanceLoop::run(const std::stop_token& stop) {
  const auto started = MaintenanceTask::Clock::now();
  for (const auto& task : tasks_) task->begin(started);
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    auto next = MaintenanceTask::Clock::time_point::max();
    for (const auto& task : tasks_) next = std::min(next, task->due());
    if (tasks_.empty()) {
      wake_.wait(lock, stop, [this] { return woken_; });
    } else {
      wake_.wait_until(lock, stop, next, [this] { return woken_; });
    }
    if (stop.stop_requested()) break;
    woken_ = false;
    lock.unlock();
    const auto now = MaintenanceTask::Clock::now();
    for (const auto& task : tasks_) {
      if (now >= task->due()) task->run(now, stop, calls_);
    }
    lock.lock();
  }
  lock.unlock();
  if (calls_.last_failed()) return;
  std::for_each(tasks_.rbegin(), tasks_.rend(), [this](const auto& task) { task->finish(calls_); });
}

}  // namespace pgjobd
