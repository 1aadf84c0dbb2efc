// JobGate: handlers that wait for the test.

#include "support/job_gate.hpp"

#include <algorithm>

namespace pgjobd::testing {

JobResult JobGate::run(const Job& job, std::stop_token stop) {
  // Runs in the thread that requests the stop. Declared before the lock, so that it is
  // destroyed after the lock is released: its destructor waits for a running callback,
  // which needs the lock.
  const std::stop_callback on_stop(stop, [this, id = job.id] {
    std::lock_guard lock(mutex_);
    stop_times_.try_emplace(id, std::chrono::steady_clock::now());
    cv_.notify_all();
  });
  std::unique_lock lock(mutex_);
  started_.push_back(job.id);
  tokens_[job.id] = stop;
  max_running_ = std::max(max_running_, static_cast<int>(started_.size()) - finished_);
  cv_.notify_all();
  // The stop token ends this wait too (condition_variable_any), as a real handler would
  // notice a stop request.
  const bool released =
      cv_.wait(lock, stop, [&] { return all_released_ || released_.count(job.id) > 0; });
  if (!released) {
    // The stop callbacks run one after another in the requesting thread, and the one that
    // woke this wait may run before ours: let ours record the time before the stop is
    // reported.
    cv_.wait(lock, [&] { return stop_times_.count(job.id) > 0; });
    stopped_.insert(job.id);
  }
  ++finished_;
  cv_.notify_all();
  return released ? JobResult::done() : JobResult::released();
}

std::optional<Completion> JobGate::execute(const Job& job, const JobStop& stop) {
  const JobResult result = run(job, stop.token());
  const bool cancelled = result.outcome != Outcome::kDone && stop.cause() == StopCause::kCancelled;
  return Completion{{job.id, job.attempt},
                    cancelled ? Outcome::kCancelled : result.outcome,
                    cancelled ? "cancelled" : result.error,
                    Millis(0)};
}

void JobGate::release(std::int64_t id) {
  std::lock_guard lock(mutex_);
  released_.insert(id);
  cv_.notify_all();
}

void JobGate::release_all() {
  std::lock_guard lock(mutex_);
  all_released_ = true;
  cv_.notify_all();
}

std::vector<std::int64_t> JobGate::started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

std::set<std::int64_t> JobGate::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

bool JobGate::stop_requested(std::int64_t id) const {
  std::lock_guard lock(mutex_);
  const auto it = tokens_.find(id);
  return it != tokens_.end() && it->second.stop_requested();
}

int JobGate::running() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(started_.size()) - finished_;
}

std::optional<std::chrono::steady_clock::time_point> JobGate::stop_requested_at(
    std::int64_t id) const {
  std::lock_guard lock(mutex_);
  const auto it = stop_times_.find(id);
  if (it == stop_times_.end()) return std::nullopt;
  return it->second;
}

int JobGate::max_running() const {
  std::lock_guard lock(mutex_);
  return max_running_;
}

int JobGate::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

bool JobGate::wait(const std::function<bool()>& condition,
                   std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, condition);
}

bool JobGate::wait_started(int n, std::chrono::milliseconds timeout) const {
  return wait([&] { return static_cast<int>(started_.size()) >= n; }, timeout);
}

bool JobGate::wait_finished(int n, std::chrono::milliseconds timeout) const {
  return wait([&] { return finished_ >= n; }, timeout);
}

bool JobGate::wait_stopped(std::int64_t id, std::chrono::milliseconds timeout) const {
  return wait([&] { return stopped_.count(id) > 0; }, timeout);
}

}  // namespace pgjobd::testing
