// Completer: batching, ordered retry through outages, final flush.

#include "engine/completer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "engine/loop_error.hpp"
#include "store/reconnect_backoff.hpp"

namespace pgjobd {

using Clock = std::chrono::steady_clock;

Completer::Completer(std::unique_ptr<CompletionStore> store, std::string worker_id,
                     bool delete_done, Metrics& metrics, Health& health)
    : store_(std::move(store)),
      worker_id_(std::move(worker_id)),
      metrics_(metrics),
      health_(health),
      delete_done_(delete_done) {}

Completer::~Completer() { stop(); }

void Completer::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}
void Completer::request_stop() { thread_.request_stop(); }
void Completer::join() { thread_.join(); }

void Completer::set_flush_deadline(Clock::time_point deadline) {
  {
    std::lock_guard lock(mutex_);
    deadline_ = deadline;
  }
  cv_.notify_one();
}

void Completer::set_delete_done(bool delete_done) {
  std::lock_guard lock(mutex_);
  delete_done_ = delete_done;
}

void Completer::submit(Completion completion) {
  bool wake;
  {
    std::lock_guard lock(mutex_);
    const bool first = queue_.empty();
    if (first) first_queued_at_ = Clock::now();
    queue_.push_back(std::move(completion));
    wake =
        first || queue_.size() == kMaxBatch || every_completion_in(taken_.size() + queue_.size());
  }
  if (wake) cv_.notify_one();
}

void Completer::set_on_written(std::function<void()> on_written) {
  on_written_ = std::move(on_written);
}

void Completer::set_on_settled(OnSettled on_settled) { on_settled_ = std::move(on_settled); }

void Completer::set_on_due(OnDue on_due) { on_due_ = std::move(on_due); }

void Completer::set_in_hand(std::function<int()> in_hand) { in_hand_ = std::move(in_hand); }

void Completer::set_flush_delay(Clock::duration delay) { flush_delay_ = delay; }

void Completer::set_gather_delay(Clock::duration delay) { gather_delay_ = delay; }

bool Completer::every_completion_in(std::size_t queued) const {
  return in_hand_ && in_hand_() <= static_cast<int>(queued);
}

bool Completer::many_to_come(std::size_t queued) const {
  return in_hand_ && in_hand_() - static_cast<int>(queued) >= kGatherInHand;
}

void Completer::set_on_retries_written(std::function<void(Millis)> on_retries_written) {
  on_retries_written_ = std::move(on_retries_written);
}

std::vector<JobAttempt> Completer::queued_jobs() const {
  std::lock_guard lock(mutex_);
  std::vector<JobAttempt> jobs;
  jobs.reserve(taken_.size() + queue_.size() + held_.size());
  for (const Completion& completion : taken_) jobs.push_back(completion.job);
  for (const Completion& completion : queue_) jobs.push_back(completion.job);
  for (const Completion& completion : held_) jobs.push_back(completion.job);
  return jobs;
}

namespace {

bool found_held(const Completion& completion, const std::vector<JobAttempt>& held) {
  return !held.empty() && std::find(held.begin(), held.end(), completion.job) != held.end();
}

}  // namespace

void Completer::run(const std::stop_token& stop) {
  ReconnectBackoff backoff;
  std::unique_lock lock(mutex_);
  const auto queued = [&] { return taken_.size() + queue_.size(); };
  const auto give_up = [&] {
    unwritten_at_stop_ = static_cast<int>(queued() + held_.size());
    spdlog::error(
        "giving up on {} unwritten completions at shutdown; their jobs return to the "
        "queue when their lease expires",
        unwritten_at_stop_);
    taken_.clear();
    queue_.clear();
    held_.clear();
    held_reported_.clear();
    metrics_.set_completions_waiting(0);
  };
  while (true) {
    if (held_.empty()) {
      cv_.wait(lock, stop, [&] { return queued() > 0; });
    } else {
      cv_.wait_until(lock, stop, held_retry_at_, [&] { return queued() > 0; });
    }
    if (!held_.empty() && Clock::now() >= held_retry_at_) {
      retry_held(lock, delete_done_);
      continue;
    }
    if (queued() == 0) {
      if (!stop.stop_requested()) continue;  // woken before the held rows' retry
      if (held_.empty()) return;             // stopping with nothing left
      if (Clock::now() >= deadline_) {
        give_up();
        return;
      }
      cv_.wait_until(lock, std::min(held_retry_at_, deadline_), [] { return false; });
      continue;
    }
    const auto all_in = [&] { return every_completion_in(queued()); };
    if (!stop.stop_requested() && queued() < kMaxBatch && !all_in()) {
      const auto delay =
          many_to_come(queued()) ? std::max(gather_delay_, flush_delay_) : flush_delay_;
      cv_.wait_until(lock, stop, first_queued_at_ + delay,
                     [&] { return queued() >= kMaxBatch || all_in(); });
    }
    // Items stay in hand (taken_) until written, so an outage keeps them, in order.
    if (taken_.empty() && queue_.size() <= kMaxBatch) {
      taken_.swap(queue_);  // the usual case: no copy, and both keep their capacity
    } else {
      // Topped up to kMaxBatch: taken_ never holds more.
      const std::size_t more = std::min(queue_.size(), kMaxBatch - taken_.size());
      const auto end = queue_.begin() + static_cast<long>(more);
      taken_.insert(taken_.end(), std::make_move_iterator(queue_.begin()),
                    std::make_move_iterator(end));
      queue_.erase(queue_.begin(), end);
    }
    const std::vector<Completion>& batch = taken_;
    const std::size_t n = batch.size();
    const bool delete_done = delete_done_;
    lock.unlock();
    Progress progress;
    try {
      const auto watch = health_.watch_call("completer");
      write(batch, 0, n, delete_done, progress);
      backoff.reset();
      health_.clear("completer");
    } catch (const std::exception& e) {  // not the rows' fault: the rest of the batch waits
      count_loop_error(&metrics_, "complete", "complete", e);
      health_.set_problem("completer", e.what());
      spdlog::warn("cannot write {} completions, will retry: {}", n - progress.settled, e.what());
      progress.other_due = true;  // it may have committed, its NOTIFY ignored
    }
    after_write(batch, progress);
    lock.lock();
    // Those found held wait aside (held_), so the batches behind them go on.
    if (!progress.held.empty()) {
      if (held_.empty()) {
        held_delay_ = kHeldRetryFirst;
        held_retry_at_ = Clock::now() + held_delay_;
      }
      // Reported at the retry, if still held (held_reported_).
      for (std::size_t i = 0; i < progress.settled; ++i) {
        if (!found_held(taken_[i], progress.held)) continue;
        spdlog::debug("job {}: its row is locked; its completion is set aside and retried alone",
                      taken_[i].job.id);
        held_.push_back(std::move(taken_[i]));
      }
      metrics_.set_completions_waiting(static_cast<double>(held_.size()));
    }
    // What was settled (written, dropped as unwritable, or set aside as held) is a prefix
    // of the batch.
    taken_.erase(taken_.begin(), taken_.begin() + static_cast<long>(progress.settled));
    if (progress.settled == n) {
      if (!queue_.empty()) first_queued_at_ = Clock::now() - flush_delay_;  // flush at once
      continue;
    }
    if (stop.stop_requested() && Clock::now() >= deadline_) {
      give_up();
      return;
    }
    // Wait out the backoff, so an outage is not hammered. Once stopping, the flush
    // deadline bounds the wait; before, a stop request ends it (one more try, then the
    // deadline rules).
    const auto retry_at = Clock::now() + backoff.next();
    if (stop.stop_requested()) {
      cv_.wait_until(lock, std::min(retry_at, deadline_), [] { return false; });
    } else {
      cv_.wait_until(lock, stop, retry_at, [] { return false; });
    }
  }
}

// The held completions alone: those whose rows are free now are written (or found stale);
// the others stay held, tried again after a longer wait. A lost connection keeps them all.
void Completer::retry_held(std::unique_lock<std::mutex>& lock, bool delete_done) {
  const std::vector<Completion> batch = held_;  // held_ stays in queued_jobs() meanwhile
  lock.unlock();
  Progress progress;
  try {
    write(batch, 0, batch.size(), delete_done, progress);
  } catch (const DbError& e) {
    metrics_.db_error("complete");
    spdlog::warn("cannot write {} completions whose rows were locked, will retry: {}",
                 batch.size() - progress.settled, e.what());
    progress.other_due = true;  // it may have committed, its NOTIFY ignored
  }
  after_write(batch, progress);
  const std::size_t released = progress.settled - progress.held.size();
  if (released > 0) {
    spdlog::info(
        "{} completions whose rows another session held are settled ({} of them stale); "
        "{} still held",
        released, progress.stale, batch.size() - released);
  }
  lock.lock();
  std::vector<Completion> still;
  std::set<JobAttempt> reported;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const bool held = i < progress.settled && found_held(batch[i], progress.held);
    if (!held && i < progress.settled) continue;  // written, stale or dropped
    still.push_back(batch[i]);
    if (held_reported_.contains(batch[i].job)) {
      reported.insert(batch[i].job);
    } else if (held) {
      reported.insert(batch[i].job);
      metrics_.completion_held();
      spdlog::warn(
          "job {}: its row is locked by another session; its completion is retried "
          "(attempt {}, {})",
          batch[i].job.id, batch[i].job.attempt, to_string(batch[i].outcome));
    }
  }
  held_.swap(still);
  held_reported_.swap(reported);
  held_delay_ = std::min(held_delay_ * 2, kHeldRetryMax);
  held_retry_at_ = Clock::now() + held_delay_;
  metrics_.set_completions_waiting(static_cast<double>(held_.size()));
}

void Completer::after_write(const std::vector<Completion>& batch, const Progress& progress) {
  // Told after the write: the row's run_at (the write's now() + delay) is then no later
  // than now + delay, so the fetcher does not wake before the retry is due.
  if (on_retries_written_) {
    std::optional<Millis> shortest;
    for (std::size_t i = 0; i < progress.settled; ++i) {
      if (batch[i].outcome != Outcome::kRetry || found_held(batch[i], progress.held)) continue;
      shortest = std::min(shortest.value_or(batch[i].retry_delay), batch[i].retry_delay);
    }
    if (shortest) on_retries_written_(*shortest);
  }
  if (on_written_ && progress.settled > progress.held.size()) on_written_();
  if (on_due_) {
    published_pid_ = progress.notify_pid;
    on_due_(progress.unblocked, progress.other_due, progress.notify_pid);
  }
  if (on_settled_ && progress.settled > 0) on_settled_(batch, progress.settled, progress.held);
  if (progress.stale > 0) {
    metrics_.stale_write(progress.stale);
    spdlog::warn("{} of {} completions were stale (the jobs were rescued or re-claimed)",
                 progress.stale, progress.settled - progress.held.size());
  }
}

// A data error (sqlstate class 22 or 23) would fail the same batch forever, holding up every
// completion of the daemon behind it. The batch is halved until the rows at fault stand alone;
// those are dropped, the others written, in order. A lost connection propagates, with
// progress.settled saying how far we got.
void Completer::write(const std::vector<Completion>& batch, std::size_t begin, std::size_t end,
                      bool delete_done, Progress& progress) {
  const auto first = batch.begin() + static_cast<long>(begin);
  const auto last = batch.begin() + static_cast<long>(end);
  try {
    const bool whole = begin == 0 && end == batch.size();  // the usual case: no copy
    const auto write_part = [&](const std::vector<Completion>& part) {
      return store_->complete(part, worker_id_, delete_done);
    };
    // Its NOTIFYs (the row triggers', retention.done 0) say what it makes due: not ignored.
    if (delete_done && published_pid_ != 0 && on_due_) {
      published_pid_ = 0;
      on_due_({}, false, 0);
    }
    const CompletionReport report =
        whole ? write_part(batch) : write_part(std::vector<Completion>(first, last));
    progress.stale += report.stale;
    progress.held.insert(progress.held.end(), report.held.begin(), report.held.end());
    progress.unblocked.insert(progress.unblocked.end(), report.unblocked.begin(),
                              report.unblocked.end());
    progress.other_due = progress.other_due || report.other_due;
    progress.notify_pid = report.notify_pid;
    progress.settled = end;
    return;
  } catch (const DbError& e) {
    // Only a row's own data can make it unwritable for good: a data exception (class 22)
    // or a constraint (class 23). Anything else (a lost connection, a read-only server, a
    // statement timeout, too many connections) passes: the whole batch waits and is
    // retried, as dropping rows for it would only turn an outage into duplicate runs.
    const bool row_at_fault = e.sqlstate().rfind("22", 0) == 0 || e.sqlstate().rfind("23", 0) == 0;
    if (e.connection_lost() || !row_at_fault) throw;
    metrics_.db_error("complete");
    if (end - begin > 1) {
      spdlog::warn(
          "the database refused {} completions ({}); writing them in parts to find the "
          "rows at fault",
          end - begin, e.what());
    } else {
      const Completion& completion = *first;
      metrics_.completion_dropped();
      spdlog::error(
          "dropping the completion of job {} attempt {} ({}): the database refuses it: {} "
          "[sqlstate {}]; the job returns to the queue when its lease expires",
          completion.job.id, completion.job.attempt, to_string(completion.outcome), e.what(),
          e.sqlstate());
      progress.settled = end;
      return;
    }
  }
  const std::size_t middle = begin + (end - begin) / 2;
  write(batch, begin, middle, delete_done, progress);
  write(batch, middle, end, delete_done, progress);
}

int Completer::unwritten_at_stop() const {
  std::lock_guard lock(mutex_);
  return unwritten_at_stop_;
}

}  // namespace pgjobd
