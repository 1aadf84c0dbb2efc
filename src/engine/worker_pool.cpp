// WorkerPool: slot accounting and the worker threads.

#include "engine/worker_pool.hpp"

#include <algorithm>
#include <stdexcept>

namespace pgjobd {

WorkerPool::WorkerPool(const WorkerConfig& config, Executor executor, Complete complete,
                       SlotFreed slot_freed, PrefetchBudget::Now now, StartThread start_thread)
    : WorkerPool(
          config,
          StartJob([executor = std::move(executor)](const Job& job, const JobStop& stop,
                                                    const JobFinish&) {
            return JobStarted{false, executor(job, stop)};
          }),
          [](const Job&) { return false; }, std::move(complete), std::move(slot_freed),
          std::move(now), std::move(start_thread)) {}

WorkerPool::WorkerPool(const WorkerConfig& config, StartJob start_job, HandsOff hands_off,
                       Complete complete, SlotFreed slot_freed, PrefetchBudget::Now now,
                       StartThread start_thread)
    : start_job_(std::move(start_job)),
      hands_off_(std::move(hands_off)),
      complete_(std::move(complete)),
      slot_freed_(std::move(slot_freed)),
      start_thread_(std::move(start_thread)),
      prefetch_(config.prefetch, std::move(now)) {
  resize(config);
}

void WorkerPool::start() {
  {
    std::lock_guard lock(mutex_);
    if (started_) throw std::logic_error("WorkerPool started twice");
    started_ = true;
  }
  grow();
}

void WorkerPool::grow() {
  std::lock_guard growing(grow_mutex_);
  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (!started_ || stopping_ || live_threads_ >= capacity_) return;
      ++live_threads_;  // counted first: the new thread compares it with capacity_
    }
    std::thread thread;
    try {
      std::function<void()> body = [this] { worker_loop(); };
      thread = start_thread_ ? start_thread_(std::move(body)) : std::thread(std::move(body));
    } catch (...) {
      std::lock_guard lock(mutex_);
      --live_threads_;
      throw;
    }
    std::lock_guard lock(mutex_);
    threads_.push_back(std::move(thread));
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
    std::lock_guard growing(grow_mutex_);
    std::lock_guard lock(mutex_);
    threads.swap(threads_);
  }
  for (auto& thread : threads) thread.join();
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return running_ == 0; });
}

void WorkerPool::resize(const WorkerConfig& config) {
  {
    std::lock_guard lock(mutex_);
    capacity_ = config.concurrency;
    prefetch_.set_max(config.prefetch);
    // Queues no longer served get no new jobs; their running jobs finish and are counted.
    for (auto& [name, state] : queue_states_) state.served = false;
    for (const auto& [name, queue] : config.queues) {
      QueueState& state = queue_states_[name];
      state.served = true;
      state.limit = queue.concurrency;
    }
  }
  // Shrinking lets surplus threads exit once idle, so no running job is interrupted;
  // growing starts threads now.
  work_ready_.notify_all();
  grow();
}

WorkerPool::~WorkerPool() {
  stop();
  // Jobs held by a pool that never started (its threads free the others).
  std::lock_guard lock(mutex_);
  while (in_hand_head_ != nullptr) unlink_locked(in_hand_head_);
}

void WorkerPool::link_locked(std::unique_ptr<Slot> slot) {
  Slot* linked = slot.release();
  linked->prev = in_hand_tail_;
  if (in_hand_tail_ != nullptr) {
    in_hand_tail_->next = linked;
  } else {
    in_hand_head_ = linked;
  }
  in_hand_tail_ = linked;
}

std::unique_ptr<WorkerPool::Slot> WorkerPool::unlink_locked(Slot* slot) {
  (slot->prev != nullptr ? slot->prev->next : in_hand_head_) = slot->next;
  (slot->next != nullptr ? slot->next->prev : in_hand_tail_) = slot->prev;
  slot->prev = slot->next = nullptr;
  return std::unique_ptr<Slot>(slot);
}

std::vector<QueueSlots> WorkerPool::free_slots(bool prefetch) const {
  std::lock_guard lock(mutex_);
  return free_slots_locked(prefetch);
}

void WorkerPool::set_hold_cap(int cap) {
  std::lock_guard lock(mutex_);
  hold_cap_ = cap;
}

int WorkerPool::global_free_locked(bool prefetch) const {
  return holdable_locked(prefetch) - busy_.load(std::memory_order_relaxed);
}

std::vector<QueueSlots> WorkerPool::free_slots_locked(bool prefetch) const {
  const int global_free = global_free_locked(prefetch);
  std::vector<QueueSlots> slots;
  for (const auto& [name, queue] : queue_states_) {
    if (!queue.served) continue;
    int free = global_free;
    if (queue.limit > 0) free = std::min(free, queue.limit - queue.busy);
    if (free > 0) slots.push_back({name, free});
  }
  return slots;
}

std::vector<std::string> WorkerPool::queues() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, queue] : queue_states_) {
    if (queue.served) names.push_back(name);
  }
  return names;
}

int WorkerPool::claimable(bool prefetch) const { return claim_budget(prefetch).limit; }

int WorkerPool::holdable(bool prefetch) const {
  std::lock_guard lock(mutex_);
  return holdable_locked(prefetch);
}

int WorkerPool::holdable_locked(bool prefetch) const {
  const int room = capacity_ + (prefetch ? prefetch_.budget() : 0);
  return hold_cap_ > 0 ? std::min(room, hold_cap_) : room;
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
  for (const auto& [name, queue] : queue_states_) {
    if (!queue.served) continue;
    int free = global_free;
    if (queue.limit > 0) free = std::min(free, queue.limit - queue.busy);
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
  return submitted_count_;
}

void WorkerPool::submit(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  const std::size_t count = jobs.size();
  const auto now = std::chrono::steady_clock::now();
  std::size_t largest_payload = 0;
  std::vector<std::unique_ptr<Slot>> slots;
  slots.reserve(count);
  for (Job& job : jobs) {
    largest_payload = std::max(largest_payload, job.payload.size());
    slots.push_back(std::make_unique<Slot>(std::move(job), now));
  }
  std::vector<std::unique_ptr<Slot>> finished;  // jobs that ended here: freed after the lock
  std::size_t waiting = 0;
  std::size_t for_workers = 0;
  {
    std::unique_lock lock(mutex_);
    for (std::unique_ptr<Slot>& owned : slots) {
      Slot* slot = owned.get();
      // A queue a reload stopped serving after the claim still counts its jobs.
      slot->queue = &queue_states_[slot->job.queue];
      ++slot->queue->busy;
      busy_.fetch_add(1, std::memory_order_relaxed);
      ++submitted_count_;
      // After the held jobs of the same or a higher priority (the claim sorted its own).
      const auto at = std::upper_bound(
          pending_.begin(), pending_.end(), slot->job.priority,
          [](int priority, const Slot* held) { return priority > held->job.priority; });
      pending_.insert(at, slot);
      link_locked(std::move(owned));
    }
    prefetch_.claimed(largest_payload);
    queued_.store(static_cast<int>(pending_.size()), std::memory_order_relaxed);
    // Jobs handed over (an http request) start here: a worker woken for each cost a futex
    // wake, a thread switch and a turn at this lock per job, for a hand-off of a microsecond
    // (bench/README.md).
    while (start_next_here_locked(lock, finished)) {
    }
    if (in_hand_head_ == nullptr) idle_.notify_all();
    // Held beyond the free slots (worker.prefetch), a job wakes no worker: it would find no
    // slot and wait again (with jobs handed over, all 64 did for every claim).
    for_workers = std::min(
        {count, pending_.size(), static_cast<std::size_t>(std::max(capacity_ - running_, 0))});
    waiting = static_cast<std::size_t>(waiting_);
  }
  // One wake-up per job, but only for threads that wait: a busy one takes the next held
  // job without one. A worker passing the wake-up on to the next (one notify per batch)
  // measured 35-45% slower, its extra wake-ups finding the queue already emptied; a
  // notify per job of a thousand held ones made a futex call for each, as the woken
  // threads ran their job and waited again before the loop ended (a third of the daemon's
  // time in the kernel). With more jobs than waiting threads, one call wakes them all.
  if (for_workers == 0) return;
  if (for_workers >= waiting) {
    work_ready_.notify_all();
  } else {
    for (std::size_t i = 0; i < for_workers; ++i) work_ready_.notify_one();
  }
}

void WorkerPool::worker_loop() {
  std::unique_ptr<Slot> finished;  // the last job's: freed outside the lock
  std::unique_lock lock(mutex_);
  while (true) {
    const auto ready = [&] {
      return (stopping_ && pending_.empty()) || (!pending_.empty() && running_ < capacity_) ||
             live_threads_ > capacity_;
    };
    if (!ready()) {
      if (finished) {
        // Not kept while waiting: a held payload may be large.
        lock.unlock();
        finished.reset();
        lock.lock();
        continue;
      }
      ++waiting_;
      work_ready_.wait(lock, ready);
      --waiting_;
    }
    if (live_threads_ > capacity_ && (!stopping_ || running_ >= capacity_)) {
      // Surplus after a resize down: exits even with jobs held (worker.prefetch), which the
      // remaining threads run, so the smaller bound holds at once. The wake-up this thread
      // took may have been meant for one of those jobs: passed on.
      --live_threads_;
      if (!pending_.empty()) work_ready_.notify_one();
      return;
    }
    if (pending_.empty()) return;        // stopping, nothing left in hand
    Slot* slot = take_pending_locked();  // freed only by this thread or its JobFinish now
    lock.unlock();
    finished.reset();
    const bool handed_off = start_taken(slot);
    const auto ended = prefetch_.now();
    lock.lock();
    if (handed_off) continue;  // the slot is its JobFinish's now
    leave_locked(*slot, ended, lock);
    // Last: once wait_idle() sees the job gone, this thread no longer calls out. The lock
    // is kept into the next wait, and only the last job out wakes wait_idle().
    finished = unlink_locked(slot);
    if (in_hand_head_ == nullptr) idle_.notify_all();
  }
}

WorkerPool::Slot* WorkerPool::take_pending_locked() {
  Slot* slot = pending_.front();
  pending_.pop_front();
  ++running_;
  queued_.store(static_cast<int>(pending_.size()), std::memory_order_relaxed);
  // Threads that waited, while stopping, for a slot for the held jobs may exit now.
  if (stopping_ && pending_.empty()) work_ready_.notify_all();
  return slot;
}

bool WorkerPool::start_taken(Slot* slot) {
  slot->started = prefetch_.now();  // its clock is fixed: no lock needed
  JobStarted started =
      start_job_(slot->job, slot->stop, [this, slot](std::optional<Completion> completion) {
        finish_handed_off(slot, std::move(completion));
      });
  if (started.handed_off) return true;
  slot->handler_returned.store(true);
  if (started.completion) complete_(std::move(*started.completion));  // only now: "done"
  return false;
}

void WorkerPool::finish_handed_off(Slot* slot, std::optional<Completion> completion) {
  slot->handler_returned.store(true);
  if (completion) complete_(std::move(*completion));  // only now may "done" be written
  const auto ended = prefetch_.now();
  std::vector<std::unique_ptr<Slot>> finished;  // freed after the lock
  std::unique_lock lock(mutex_);
  leave_locked(*slot, ended, lock);
  finished.push_back(unlink_locked(slot));
  // The next held job, started here when it is handed over too; one that holds its thread
  // goes to a worker (this is the handler's thread).
  start_next_here_locked(lock, finished);
  // Its slot may be what a held job waits for; join() waits for the last one.
  if (!pending_.empty() && running_ < capacity_ && waiting_ > 0) work_ready_.notify_one();
  if (in_hand_head_ == nullptr || running_ == 0) idle_.notify_all();
}

bool WorkerPool::start_next_here_locked(std::unique_lock<std::mutex>& lock,
                                        std::vector<std::unique_ptr<Slot>>& finished) {
  while (!pending_.empty() && running_ < capacity_ && !stopping_ &&
         hands_off_(pending_.front()->job)) {
    Slot* slot = take_pending_locked();
    lock.unlock();
    const bool handed_off = start_taken(slot);
    const auto ended = prefetch_.now();
    lock.lock();
    if (handed_off) return true;
    // A reload made its handler one that runs in place: it ended here, and leaves.
    leave_locked(*slot, ended, lock);
    finished.push_back(unlink_locked(slot));
  }
  return false;
}

void WorkerPool::leave_locked(const Slot& slot, std::chrono::steady_clock::time_point ended,
                              std::unique_lock<std::mutex>& lock) {
  --running_;
  --slot.queue->busy;
  prefetch_.finished(slot.started, ended);
  const int busy_now = busy_.fetch_sub(1, std::memory_order_relaxed) - 1;
  if (const SlotWake wake = slot_wake_locked(*slot.queue, busy_now); wake.call) {
    const int working_now = busy_now - queued_.load(std::memory_order_relaxed);
    lock.unlock();
    slot_freed_(working_now, wake.for_fetcher);
    lock.lock();
  }
}

WorkerPool::SlotWake WorkerPool::slot_wake_locked(const QueueState& queue, int busy_now) {
  if (wake_wanted_ == kEverySlot) return {true, true};
  if (wake_wanted_ != kNoSlotWake && claimable_locked(wake_prefetch_) >= wake_wanted_) {
    wake_wanted_ = kNoSlotWake;  // once per arming
    return {true, true};
  }
  // A queue's own limit: its slot may be what a saturated queue waits for.
  if (queue.served && queue.limit > 0) return {true, true};
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
  std::vector<std::unique_ptr<Slot>> freed;  // after the lock
  std::lock_guard lock(mutex_);
  released.reserve(pending_.size());
  freed.reserve(pending_.size());
  for (Slot* slot : pending_) {
    released.push_back(slot->attempt());
    --slot->queue->busy;
    busy_.fetch_sub(1, std::memory_order_relaxed);
    freed.push_back(unlink_locked(slot));
  }
  pending_.clear();
  queued_.store(0, std::memory_order_relaxed);
  if (stopping_) work_ready_.notify_all();  // see take_pending_locked
  if (in_hand_head_ == nullptr) idle_.notify_all();
  return released;
}

std::vector<JobAttempt> WorkerPool::running() const {
  std::lock_guard lock(mutex_);
  std::vector<JobAttempt> jobs;
  jobs.reserve(static_cast<std::size_t>(busy_.load(std::memory_order_relaxed)));
  for_each_in_hand_locked([&](const Slot& slot) { jobs.push_back(slot.attempt()); });
  return jobs;
}

std::vector<JobAttempt> WorkerPool::still_running(const std::vector<JobAttempt>& jobs) const {
  std::vector<JobAttempt> out;
  std::lock_guard lock(mutex_);
  for_each_in_hand_locked([&](const Slot& slot) {
    if (!slot.handler_returned &&
        std::find(jobs.begin(), jobs.end(), slot.attempt()) != jobs.end()) {
      out.push_back(slot.attempt());
    }
  });
  return out;
}

void WorkerPool::stop_jobs(const std::vector<JobAttempt>& jobs) {
  std::lock_guard lock(mutex_);
  for_each_in_hand_locked([&](Slot& slot) {
    if (std::find(jobs.begin(), jobs.end(), slot.attempt()) != jobs.end()) {
      slot.stop.request(StopCause::kDaemon);
    }
  });
}

void WorkerPool::stop_all_jobs() {
  std::lock_guard lock(mutex_);
  for_each_in_hand_locked([](Slot& slot) { slot.stop.request(StopCause::kDaemon); });
}

std::vector<JobAttempt> WorkerPool::cancel_jobs(const std::vector<JobAttempt>& jobs) {
  std::vector<JobAttempt> cancelled;
  std::lock_guard lock(mutex_);
  for_each_in_hand_locked([&](Slot& slot) {
    if (slot.cancelled || slot.handler_returned ||
        std::find(jobs.begin(), jobs.end(), slot.attempt()) == jobs.end()) {
      return;
    }
    slot.cancelled = true;
    slot.stop.request(StopCause::kCancelled);
    cancelled.push_back(slot.attempt());
  });
  return cancelled;
}

void WorkerPool::renewed(const std::vector<JobAttempt>& jobs,
                         std::chrono::steady_clock::time_point sent_at) {
  std::vector<JobAttempt> sorted = jobs;
  std::sort(sorted.begin(), sorted.end());
  std::lock_guard lock(mutex_);
  for_each_in_hand_locked([&](Slot& slot) {
    if (std::binary_search(sorted.begin(), sorted.end(), slot.attempt())) {
      slot.renewed = std::max(slot.renewed, sent_at);
    }
  });
}

std::vector<JobAttempt> WorkerPool::stop_expired(Millis lease) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<JobAttempt> stopped;
  std::lock_guard lock(mutex_);
  for_each_in_hand_locked([&](Slot& slot) {
    if (slot.lease_lost || slot.renewed + lease > now) return;
    slot.lease_lost = true;
    slot.stop.request(StopCause::kDaemon);
    stopped.push_back(slot.attempt());
  });
  return stopped;
}

bool WorkerPool::wait_idle(std::chrono::steady_clock::time_point deadline, bool interruptible) {
  std::unique_lock lock(mutex_);
  idle_.wait_until(lock, deadline,
                   [&] { return in_hand_head_ == nullptr || (interruptible && interrupted_); });
  return in_hand_head_ == nullptr;
}

void WorkerPool::interrupt_wait() {
  {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
  }
  idle_.notify_all();
}

}  // namespace pgjobd
