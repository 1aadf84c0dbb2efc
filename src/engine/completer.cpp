// Completer: batching, ordered retry through outages, final flush.

#include "engine/completer.hpp"

#include <spdlog/spdlog.h>

#include "db/connection.hpp"

namespace pgjobd {

using Clock = std::chrono::steady_clock;

Completer::Completer(const DatabaseConfig& db, std::string worker_id, bool delete_done,
                     Metrics& metrics, Health& health)
    : store_(db, "completer"),
      worker_id_(std::move(worker_id)),
      delete_done_(delete_done),
      metrics_(metrics),
      health_(health),
      thread_([this] { run(); }) {}

Completer::~Completer() { stop(Clock::now()); }

void Completer::submit(Completion completion) {
  bool wake;
  {
    std::lock_guard lock(mutex_);
    const bool first = queue_.empty();
    if (first) first_queued_at_ = Clock::now();
    queue_.push_back(std::move(completion));
    wake = first || queue_.size() == kMaxBatch;
  }
  if (wake) cv_.notify_one();
}

std::size_t Completer::backlog() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

std::vector<std::pair<std::int64_t, int>> Completer::queued_jobs() const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::int64_t, int>> jobs;
  jobs.reserve(queue_.size());
  for (const Completion& completion : queue_) jobs.emplace_back(completion.id, completion.attempt);
  return jobs;
}

void Completer::stop(Clock::time_point deadline) {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    deadline_ = deadline;
  }
  cv_.notify_one();
  thread_.join();
}

void Completer::run() {
  ReconnectBackoff backoff;
  std::unique_lock lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    if (!stopping_ && queue_.size() < kMaxBatch) {
      cv_.wait_until(lock, first_queued_at_ + kFlushDelay,
                     [&] { return stopping_ || queue_.size() >= kMaxBatch; });
    }
    const std::size_t n = std::min(queue_.size(), kMaxBatch);
    // Items stay queued until written, so an outage keeps them, in order.
    std::vector<Completion> batch(queue_.begin(), queue_.begin() + static_cast<long>(n));
    lock.unlock();
    bool written = false;
    try {
      const CompletionReport report = store_.complete(batch, worker_id_, delete_done_);
      written = true;
      backoff.reset();
      health_.clear("completer");
      if (report.stale > 0) {
        metrics_.stale_write(report.stale);
        spdlog::warn("{} of {} completions were stale (the jobs were rescued or re-claimed)",
                     report.stale, batch.size());
      }
    } catch (const DbError& e) {
      metrics_.db_error("complete");
      health_.set_problem("completer", e.what());
      spdlog::warn("cannot write {} completions, will retry: {}", batch.size(), e.what());
    }
    lock.lock();
    if (written) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n));
      if (!queue_.empty()) first_queued_at_ = Clock::now() - kFlushDelay;  // flush at once
      continue;
    }
    if (stopping_ && Clock::now() >= deadline_) {
      spdlog::error(
          "giving up on {} unwritten completions at shutdown; their jobs return to the "
          "queue when their lease expires",
          queue_.size());
      queue_.clear();
      return;
    }
    const auto wait = backoff.next();
    cv_.wait_for(lock, std::min<Clock::duration>(wait, deadline_ - Clock::now()));
  }
}

}  // namespace pgjobd
