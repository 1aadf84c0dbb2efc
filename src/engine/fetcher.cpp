// Fetcher: the claim loop and its adaptive poll interval.

#include "engine/fetcher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "db/connection.hpp"

namespace pgjobd {

using Clock = std::chrono::steady_clock;

namespace {
// ±10%: daemons that started together do not poll in lockstep.
Clock::duration jittered(Millis interval) {
  thread_local std::mt19937 generator{std::random_device{}()};
  std::uniform_real_distribution<double> factor(0.9, 1.1);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(
      static_cast<double>(interval.count()) * factor(generator)));
}
}  // namespace

Fetcher::Fetcher(const Config& config, std::vector<std::string> types, std::string worker_id,
                 WorkerPool& pool, Metrics& metrics, Health& health)
    : lease_(config.lease.duration),
      worker_id_(std::move(worker_id)),
      pool_(pool),
      metrics_(metrics),
      health_(health),
      store_(config.database, "fetcher"),
      min_interval_(config.poll.min_interval),
      max_interval_(config.poll.max_interval),
      types_(std::move(types)),
      interval_(config.poll.min_interval),
      thread_([this] { run(); }) {}

Fetcher::~Fetcher() { stop(); }

void Fetcher::wake() {
  {
    std::lock_guard lock(mutex_);
    wake_requested_ = true;
  }
  cv_.notify_one();
}

void Fetcher::slot_freed() {
  // Taking the lock orders this notify after the waiter's predicate check: no lost wake-up.
  { std::lock_guard lock(mutex_); }
  cv_.notify_one();
}

void Fetcher::reconfigure(const PollConfig& poll, std::vector<std::string> types) {
  {
    std::lock_guard lock(mutex_);
    min_interval_ = poll.min_interval;
    max_interval_ = poll.max_interval;
    interval_ = std::clamp(interval_, min_interval_, max_interval_);
    types_ = std::move(types);
    wake_requested_ = true;  // new types may have waiting jobs
  }
  cv_.notify_one();
}

void Fetcher::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

int Fetcher::claim_batch_floor() const { return std::max(1, pool_.capacity() / 2); }

Millis Fetcher::max_interval() const {
  std::lock_guard lock(mutex_);
  return max_interval_;
}

void Fetcher::run() {
  ReconnectBackoff backoff;
  while (true) {
    last_progress_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    {
      std::unique_lock lock(mutex_);
      const auto due = [&] { return wake_requested_ || backlog_ || Clock::now() >= next_poll_; };
      // A claim costs a round trip and a transaction whatever its size, so while most
      // slots are busy it waits, up to kClaimCooldown after the last claim, for half of
      // them to be free; an idle pool claims at once. Claiming for each freed slot made
      // batches of 1-10 jobs that held the claim connection while hundreds of slots freed
      // behind it.
      const auto enough_free = [&](int free) {
        return free > 0 && (free >= claim_batch_floor() || Clock::now() >= cooled_down_at_);
      };
      while (!stopping_) {
        const int free = pool_.claimable();
        if (due() && enough_free(free)) break;
        if (free <= 0) {
          cv_.wait(lock);  // pool full: a finishing job wakes us
        } else if (due()) {
          cv_.wait_until(lock, cooled_down_at_);  // or until enough jobs finish
        } else {
          cv_.wait_until(lock, next_poll_);
        }
      }
      if (stopping_) return;
      wake_requested_ = false;
    }
    bool full = false;
    try {
      full = claim_once();
      backoff.reset();
      health_.clear("fetcher");
    } catch (const DbError& e) {
      metrics_.db_error("claim");
      health_.set_problem("fetcher", e.what());
      const auto wait = backoff.next();
      spdlog::warn("claim failed, retrying in {}ms: {}", wait.count(), e.what());
      std::lock_guard lock(mutex_);
      backlog_ = false;
      next_poll_ = Clock::now() + wait;
      continue;
    }
    std::lock_guard lock(mutex_);
    backlog_ = full;
    cooled_down_at_ = Clock::now() + kClaimCooldown;
    metrics_.set_poll_interval(std::chrono::duration<double>(interval_).count());
    if (!full) next_poll_ = Clock::now() + jittered(interval_);
  }
}

bool Fetcher::claim_once() {
  const std::vector<QueueSlots> slots = pool_.free_slots();
  const int limit = pool_.claimable();
  if (slots.empty() || limit <= 0) return false;
  std::vector<std::string> types;
  {
    std::lock_guard lock(mutex_);
    types = types_;
  }
  std::vector<Job> jobs = store_.claim(slots, types, limit, worker_id_, lease_);
  metrics_.fetch_batch(static_cast<int>(jobs.size()));
  const bool full = static_cast<int>(jobs.size()) == limit;
  {
    std::lock_guard lock(mutex_);
    if (jobs.empty()) {
      interval_ = std::min(interval_ * 2, max_interval_);
    } else {
      interval_ = min_interval_;
    }
  }
  // Higher priority first; RETURNING does not keep the claim order.
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.id < b.id;
  });
  for (const Job& job : jobs) {
    spdlog::debug("claimed job {} ({}) attempt {}", job.id, job.type, job.attempt);
  }
  pool_.submit(std::move(jobs));
  metrics_.set_workers_busy(pool_.busy());
  return full;
}

}  // namespace pgjobd
