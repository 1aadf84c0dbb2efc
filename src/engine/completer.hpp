#pragma once
// Writes the outcomes that workers hand it: in batches (one transaction for many jobs),
// in order, and keeps them through a database outage until they can be written. (The
// sql handler writes its own job's outcome, and the rescuer those of expired leases.)
// A completion whose row another session holds locked (an application's open
// transaction) is kept aside and retried alone, every 250 ms backing off to 2 s, while
// the batches behind it are written.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/health.hpp"
#include "metrics/metrics.hpp"
#include "runtime/service.hpp"
#include "store/completion_store.hpp"

namespace pgjobd {

class Completer final : public Service {
 public:
  // delete_done: retention.done is 0, so done jobs are deleted instead of kept.
  Completer(std::unique_ptr<CompletionStore> store, std::string worker_id, bool delete_done,
            Metrics& metrics, Health& health);
  ~Completer() override;  // stop() with no time for retries
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  void start() override;
  // Stopping writes everything submitted so far, retrying through errors until the flush
  // deadline (now, unless set_flush_deadline() said otherwise). What could not be written
  // by then is logged: the rescuer returns those jobs to the queue once their lease
  // expires (delayed, not lost).
  void request_stop() override;
  void join() override;
  void set_flush_deadline(std::chrono::steady_clock::time_point deadline);

  void submit(Completion completion);
  void set_delete_done(bool delete_done);  // live reload
  // Called (on the completer's thread) after a batch holding retries was written, with the
  // shortest of their delays: the fetcher then wakes when that retry is due without asking
  // the database. Set before start().
  void set_on_retries_written(std::function<void(Millis shortest_delay)> on_retries_written);
  // Called (on the completer's thread) after each batch that wrote something. Set before
  // start().
  void set_on_written(std::function<void()> on_written);
  // Called (on the completer's thread) after each write, committed, with the batch, how much
  // of it was settled (written, stale or dropped) and those of them found held (not
  // written): the finished-job notifier's feed. Set before start().
  using OnSettled = std::function<void(const std::vector<Completion>& batch, std::size_t settled,
                                       const std::vector<JobAttempt>& held)>;
  void set_on_settled(OnSettled on_settled);
  // Called (on the completer's thread) after each write, with what it made due
  // (CompletionReport: the children unblocked, whether other jobs may be due, the session's
  // process, whose NOTIFYs of new jobs these calls stand for; other_due is also set after a
  // write that failed, which may have committed), and before a write whose NOTIFYs they
  // would not stand for, with ({}, false, 0). Set before start().
  using OnDue = std::function<void(const std::vector<std::int64_t>& unblocked, bool other_due,
                                   int notify_pid)>;
  void set_on_due(OnDue on_due);
  // How many jobs the worker pool holds (running or held), their completions among them until
  // their slots are freed. A batch is written without waiting out the flush delay once every
  // one of them has its completion queued: no other completion is coming to share it (a
  // chain of dependent jobs waited the whole delay at each link). Set before start().
  void set_in_hand(std::function<int()> in_hand);
  // kFlushDelay and kGatherDelay unless set (tests). Set before start().
  void set_flush_delay(std::chrono::steady_clock::duration delay);
  void set_gather_delay(std::chrono::steady_clock::duration delay);

  // The attempts of completions not yet written, the batch being written and those whose
  // rows are held by another session included: their leases must still be renewed, or a
  // completer held up by the database could see them rescued and run again before it
  // writes that they finished.
  std::vector<JobAttempt> queued_jobs() const;

  // How many completions stop() gave up on at the flush deadline (0 until then, and after
  // a stop that wrote everything). Their jobs return to the queue when their leases expire.
  int unwritten_at_stop() const;

  static constexpr std::size_t kMaxBatch = 1000;
  // A short wait lets completions that finish together share one transaction.
  static constexpr std::chrono::microseconds kFlushDelay{1000};
  // While at least kGatherInHand jobs are in hand (set_in_hand) and not yet queued, more
  // completions are sure to come soon: the batch gathers for up to kGatherDelay (or until
  // kMaxBatch), as each batch is a transaction whatever its size (bench/README.md, issue
  // 44, measures it). A pool without prefetch holds at most its threads (64 by default),
  // so only a fast stream of short jobs (or a pool of that many threads) waits longer.
  static constexpr int kGatherInHand = 256;
  static constexpr std::chrono::microseconds kGatherDelay{4000};
  // Completions whose rows another session holds are tried again after this, doubling up
  // to kHeldRetryMax while any stays held.
  static constexpr std::chrono::milliseconds kHeldRetryFirst{250};
  static constexpr std::chrono::milliseconds kHeldRetryMax{2000};

 private:
  struct Progress {
    std::size_t settled = 0;  // batch[0, settled) written, dropped or found held
    int stale = 0;
    std::vector<JobAttempt> held;         // of those settled, the ones whose rows were held
    std::vector<std::int64_t> unblocked;  // CompletionReport's, of the writes so far
    bool other_due = false;
    int notify_pid = 0;
  };
  void run(const std::stop_token& stop);
  // Whether `queued` completions are those of every job the pool holds (set_in_hand).
  bool every_completion_in(std::size_t queued) const;
  // Whether at least kGatherInHand more jobs are in hand than `queued` (see kGatherDelay).
  bool many_to_come(std::size_t queued) const;
  // Writes held_ again (called with the lock held; unlocks it while writing).
  void retry_held(std::unique_lock<std::mutex>& lock, bool delete_done);
  // After a write of batch[0, progress.settled): the callbacks, and the stale count.
  void after_write(const std::vector<Completion>& batch, const Progress& progress);
  // Writes batch[begin, end), isolating and dropping rows the database refuses; throws the
  // DbError of a lost connection.
  void write(const std::vector<Completion>& batch, std::size_t begin, std::size_t end,
             bool delete_done, Progress& progress);

  const std::unique_ptr<CompletionStore> store_;
  const std::string worker_id_;
  Metrics& metrics_;
  Health& health_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable_any cv_;
  // Submitted, not yet taken for a batch. The completer swaps the whole vector out rather
  // than copy a batch of up to kMaxBatch under the lock: 64 workers handing over their
  // completions queued behind that copy (bench/README, "two more shared locks").
  std::vector<Completion> queue_;
  // The batch being written, or waiting to be retried after an outage: ahead of queue_.
  // Changed only by the completer's thread, under the lock; it reads it without.
  std::vector<Completion> taken_;
  // Completions found held (CompletionReport::held), retried alone at held_retry_at_.
  // Changed only by the completer's thread, under the lock.
  std::vector<Completion> held_;
  // Those of held_ logged and counted: found held at a retry too. The daemon's own heartbeat
  // holds a job's row for the milliseconds of its write, and a batch that meets it skips
  // that row as well; only a row still held at the retry is another session's.
  std::set<JobAttempt> held_reported_;
  std::chrono::steady_clock::time_point held_retry_at_;
  std::chrono::milliseconds held_delay_ = kHeldRetryFirst;
  std::chrono::steady_clock::time_point first_queued_at_;
  std::chrono::steady_clock::duration flush_delay_ = kFlushDelay;    // set before start()
  std::chrono::steady_clock::duration gather_delay_ = kGatherDelay;  // set before start()
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::min();
  bool delete_done_;
  int unwritten_at_stop_ = 0;
  std::function<void(Millis)> on_retries_written_;  // set before start()
  std::function<void()> on_written_;                // set before start()
  OnSettled on_settled_;                            // set before start()
  OnDue on_due_;                                    // set before start()
  std::function<int()> in_hand_;                    // set before start()
  int published_pid_ = 0;  // the last notify_pid given to on_due_ (completer's thread only)
  ServiceThread thread_;   // last: joined before the members it uses go away
};

}  // namespace pgjobd
