// WorkerPool: slot accounting and the worker threads.

#include "engine/worker_pool.hpp"

#include <algorithm>
#include <stdexcept>

namespace pgjobd {

WorkerPool::WorkerPool(const WorkerConfig& config, Executor executor, Complete complete,
                       SlotFreed slot_freed, PrefetchBudget::Now now)
    : executor_(std::move(executor)),
      complete_(std::move(complete)),
      slot_freed_(std::move(slot_freed)),
      prefetch_(config.prefetch, std::move(now)) {
  resize(config);
}

void WorkerPool::start() {
  std::lock_guard lock(mutex_);
  if (started_) throw std::logic_error("WorkerPool started twice");
  started_ = true;
  grow_locked();
}

void WorkerPool::grow_locked() {
  if (!started_ || stopping_) return;
  while (live_threads_ < capacity_) {
    ++live_threads_;
    threads_.emplace_back([this] { worker_loop(); });
  }
}

void WorkerPool::request_stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
}

void WorkerPool::join() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    threads.swap(threads_);
  }
  for (auto& thread : threads) thread.join();
}

void WorkerPool::resize(const WorkerConfig& config) {
  std::lock_guard lock(mutex_);
  capacity_ = config.concurrency;
  prefetch_.set_max(config.prefetch);
  // Queues no longer served get no new jobs; their running jobs finish and are counted.
  queue_limits_.clear();
  for (const auto& [name, queue] : config.queues) {
    queue_limits_[name] = queue.concurrency;
    queue_busy_.try_emplace(name, 0);
  }
  // Growing starts threads now; shrinking lets surplus threads exit once idle, so no
  // running job is interrupted.
  grow_locked();
  work_ready_.notify_all();
}

WorkerPool::~WorkerPool() { stop(); }

std::vector<QueueSlots> WorkerPool::free_slots(bool prefetch) const {
  std::lock_guard lock(mutex_);
  return free_slots_locked(prefetch);
}

int WorkerPool::global_free_locked(bool prefetch) const {
  const int room = capacity_ + (prefetch ? prefetch_.budget() : 0);
  return room - busy_.load(std::memory_order_relaxed);
}

std::vector<QueueSlots> WorkerPool::free_slots_locked(bool prefetch) const {
  const int global_free = global_free_locked(prefetch);
  std::vector<QueueSlots> slots;
  for (const auto& [name, limit] : queue_limits_) {
    int free = global_free;
    if (limit > 0) free = std::min(free, limit - queue_busy_.at(name));
    if (free > 0) slots.push_back({name, free});
  }
  return slots;
}

std::vector<std::string> WorkerPool::queues() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  names.reserve(queue_limits_.size());
  for (const auto& [name, limit] : queue_limits_) names.push_back(name);
  return names;
}

int WorkerPool::claimable(bool prefetch) const { return claim_budget(prefetch).limit; }

int WorkerPool::holdable(bool prefetch) const {
  std::lock_guard lock(mutex_);
  return capacity_ + (prefetch ? prefetch_.budget() : 0);
}

WorkerPool::ClaimBudget WorkerPool::claim_budget(bool prefetch) const {
  std::lock_guard lock(mutex_);
  return claim_budget_locked(prefetch);
}

WorkerPool::ClaimBudget WorkerPool::claim_budget_locked(bool prefetch) const {
  ClaimBudget budget{free_slots_locked(prefetch), 0};
  for (const auto& slot : budget.slots) budget.limit += slot.free;
  // After a resize down, busy can exceed the capacity for a while: nothing to claim.
  budget.limit = std::max(0, std::min(budget.limit, global_free_locked(prefetch)));
  return budget;
}

int WorkerPool::claimable_locked(bool prefetch) const {
  const int global_free = global_free_locked(prefetch);
  int sum = 0;
  for (const auto& [name, limit] : queue_limits_) {
    int free = global_free;
    if (limit > 0) free = std::min(free, limit - queue_busy_.at(name));
    if (free > 0) sum += free;
  }
  return std::max(0, std::min(sum, global_free));
}

int WorkerPool::capacity() const {
  std::lock_guard lock(mutex_);
  return capacity_;
}

std::uint64_t WorkerPool::submitted() const {
  std::lock_guard lock(mutex_);
  return next_ticket_;
}

void WorkerPool::submit(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  const std::size_t count = jobs.size();
  std::size_t waiting = 0;
  {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    std::size_t largest_payload = 0;
    for (Job& job : jobs) {
      const std::uint64_t ticket = next_ticket_++;
      const Entry& entry = running_
                               .try_emplace(ticket, JobAttempt{job.id, job.attempt},
                                            std::make_shared<JobStop>(), now)
                               .first->second;
      ++queue_busy_[job.queue];
      busy_.fetch_add(1, std::memory_order_relaxed);
      largest_payload = std::max(largest_payload, job.payload.size());
      // After the held jobs of the same or a higher priority (the claim sorted its own).
      const auto at = std::upper_bound(
          pending_.begin(), pending_.end(), job.priority,
          [](int priority, const Task& held) { return priority > held.job.priority; });
      pending_.insert(at, Task{std::move(job), ticket, entry.stop});
    }
    prefetch_.claimed(largest_payload);
    queued_.store(static_cast<int>(pending_.size()), std::memory_order_relaxed);
    waiting = static_cast<std::size_t>(waiting_);
  }
  // One wake-up per job, but only for threads that wait: a busy one takes the next held
  // job without one. A worker passing the wake-up on to the next (one notify per batch)
  // measured 35-45% slower, its extra wake-ups finding the queue already emptied; a
  // notify per job of a thousand held ones made a futex call for each, as the woken
  // threads ran their job and waited again before the loop ended (a third of the daemon's
  // time in the kernel). With more jobs than waiting threads, one call wakes them all.
  if (count >= waiting) {
    work_ready_.notify_all();
  } else {
    for (std::size_t i = 0; i < count; ++i) work_ready_.notify_one();
  }
}

void WorkerPool::worker_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    const auto ready = [&] { return stopping_ || !pending_.empty() || live_threads_ > capacity_; };
    if (!ready()) {
      ++waiting_;
      work_ready_.wait(lock, ready);
      --waiting_;
    }
    if (!stopping_ && live_threads_ > capacity_) {
      // Surplus after a resize down: exits even with jobs held (worker.prefetch), which the
      // remaining threads run, so the smaller bound holds at once. The wake-up this thread
      // took may have been meant for one of those jobs: passed on.
      --live_threads_;
      if (!pending_.empty()) work_ready_.notify_one();
      return;
    }
    if (pending_.empty()) return;  // stopping, nothing left in hand
    Task task = std::move(pending_.front());
    pending_.pop_front();
    queued_.store(static_cast<int>(pending_.size()), std::memory_order_relaxed);
    Entry& entry = running_.at(task.ticket);  // erased only by this thread from now on
    lock.unlock();

    const auto started = prefetch_.now();  // its clock is fixed: no lock needed
    std::optional<Completion> completion = executor_(task.job, *task.stop);
    entry.handler_returned.store(true);
    if (completion) complete_(std::move(*completion));  // only now may "done" be written
    lock.lock();
    --queue_busy_[task.job.queue];
    prefetch_.finished(started);
    const int busy_now = busy_.fetch_sub(1, std::memory_order_relaxed) - 1;
    if (const SlotWake wake = slot_wake_locked(task.job.queue, busy_now); wake.call) {
      const int working_now = busy_now - queued_.load(std::memory_order_relaxed);
      lock.unlock();
      slot_freed_(working_now, wake.for_fetcher);
      lock.lock();
    }
    // Last: once wait_idle() sees the job gone, this thread no longer calls out. The lock
    // is kept into the next wait, and only the last job out wakes wait_idle().
    running_.erase(task.ticket);
    if (running_.empty()) idle_.notify_all();
  }
}

WorkerPool::SlotWake WorkerPool::slot_wake_locked(const std::string& queue, int busy_now) {
  if (wake_wanted_ == kEverySlot) return {true, true};
  if (wake_wanted_ != kNoSlotWake && claimable_locked(wake_prefetch_) >= wake_wanted_) {
    wake_wanted_ = kNoSlotWake;  // once per arming
    return {true, true};
  }
  // A queue's own limit: its slot may be what a saturated queue waits for.
  const auto limit = queue_limits_.find(queue);
  if (limit != queue_limits_.end() && limit->second > 0) return {true, true};
  // An idle pool: the busy gauge (set by the callback) then reads 0 whatever the fetcher
  // waits for.
  return {busy_now == 0, false};
}

bool WorkerPool::arm_slot_wake(int free_wanted, bool prefetch) {
  std::lock_guard lock(mutex_);
  if (free_wanted <= 0) {
    wake_wanted_ = kNoSlotWake;
    return false;
  }
  if (claimable_locked(prefetch) >= free_wanted) return true;
  // Looked at again as each job leaves (slot_wake_locked): a job frees its slot and may
  // grow the prefetch budget. (Counted in slots alone, a budget grown meanwhile made the
  // wake-up come late.)
  wake_wanted_ = free_wanted;
  wake_prefetch_ = prefetch;
  return false;
}

std::vector<JobAttempt> WorkerPool::release_queued() {
  std::vector<JobAttempt> released;
  std::lock_guard lock(mutex_);
  released.reserve(pending_.size());
  for (const Task& task : pending_) {
    released.push_back({task.job.id, task.job.attempt});
    running_.erase(task.ticket);
    --queue_busy_[task.job.queue];
    busy_.fetch_sub(1, std::memory_order_relaxed);
  }
  pending_.clear();
  queued_.store(0, std::memory_order_relaxed);
  if (running_.empty()) idle_.notify_all();
  return released;
}

std::vector<JobAttempt> WorkerPool::running() const {
  std::lock_guard lock(mutex_);
  std::vector<JobAttempt> jobs;
  jobs.reserve(running_.size());
  for (const auto& [ticket, entry] : running_) jobs.push_back(entry.job);
  return jobs;
}

std::vector<JobAttempt> WorkerPool::still_running(const std::vector<JobAttempt>& jobs) const {
  std::vector<JobAttempt> out;
  std::lock_guard lock(mutex_);
  for (const auto& [ticket, entry] : running_) {
    if (!entry.handler_returned && std::find(jobs.begin(), jobs.end(), entry.job) != jobs.end()) {
      out.push_back(entry.job);
    }
  }
  return out;
}

void WorkerPool::stop_jobs(const std::vector<JobAttempt>& jobs) {
  std::lock_guard lock(mutex_);
  for (auto& [ticket, entry] : running_) {
    if (std::find(jobs.begin(), jobs.end(), entry.job) != jobs.end()) {
      entry.stop->request(StopCause::kDaemon);
    }
  }
}

void WorkerPool::stop_all_jobs() {
  std::lock_guard lock(mutex_);
  for (auto& [ticket, entry] : running_) entry.stop->request(StopCause::kDaemon);
}

std::vector<JobAttempt> WorkerPool::cancel_jobs(const std::vector<JobAttempt>& jobs) {
  std::vector<JobAttempt> cancelled;
  std::lock_guard lock(mutex_);
  for (auto& [ticket, entry] : running_) {
    if (entry.cancelled || entry.handler_returned ||
        std::find(jobs.begin(), jobs.end(), entry.job) == jobs.end()) {
      continue;
    }
    entry.cancelled = true;
    entry.stop->request(StopCause::kCancelled);
    cancelled.push_back(entry.job);
  }
  return cancelled;
}

std::vector<JobAttempt> WorkerPool::stop_expired(std::chrono::steady_clock::time_point renewed_at,
                                                 Millis lease) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<JobAttempt> stopped;
  std::lock_guard lock(mutex_);
  for (auto& [ticket, entry] : running_) {
    if (entry.lease_lost || std::max(entry.submitted, renewed_at) + lease > now) continue;
    entry.lease_lost = true;
    entry.stop->request(StopCause::kDaemon);
    stopped.push_back(entry.job);
  }
  return stopped;
}

bool WorkerPool::wait_idle(std::chrono::steady_clock::time_point deadline, bool interruptible) {
  std::unique_lock lock(mutex_);
  idle_.wait_until(lock, deadline,
                   [&] { return running_.empty() || (interruptible && interrupted_); });
  return running_.empty();
}

void WorkerPool::interrupt_wait() {
  {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
  }
  idle_.notify_all();
}

}  // namespace pgjobd
