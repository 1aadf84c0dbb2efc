#pragma once
// What wakes the claim loop: new jobs may be due (a NOTIFY, a reload, Engine::wake), a
// worker freed its slot, or a job will be due at a known time (a retry the completer wrote). The
// pool, the listener and the fetcher are each given the one signal, so none of them needs to hold
// another.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace pgjobd {

struct ClaimSignal {
  // New jobs may be due: the next wait ends at once and a claim follows.
  void wake() {
    {
      std::lock_guard lock(mutex);
      woken = true;
      woken_not_for_insert = true;
      ++events;
    }
    cv.notify_one();
  }
  // The INSERT trigger's NOTIFY: as wake(), and the claim it sets off is followed by one
  // more shortly after (Fetcher::Options::trailing_claim), for the jobs whose INSERT
  // relied on it.
  void wake_for_insert() {
    {
      std::lock_guard lock(mutex);
      woken = true;
      for_insert = true;
      ++events;
    }
    cv.notify_one();
  }
  // Free slots changed (a worker's, or the limits lifted, so that claims may prefetch): the
  // waiter re-checks whether it may claim now.
  void slot_freed() {
    {
      std::lock_guard lock(mutex);
      ++events;
    }
    cv.notify_one();
  }

  // Completions were written: jobs ended in the database, so they no longer count against
  // their limits (README "Limits"). The fetcher claims again if its last claim was held back by
  // a concurrency limit; otherwise this changes nothing, and it is not woken (in a stream
  // that cost a context switch per batch written).
  void completions_written() {
    bool wake = false;
    {
      std::lock_guard lock(mutex);
      ++written;
      if (wants_written) {
        wake = true;
        ++events;
      }
    }
    if (wake) cv.notify_one();
  }

  // A job will be due at `when` (a retry this daemon wrote): the fetcher claims then, not
  // at its next poll, without asking the database. Only the earliest such time is kept.
  void due_at(std::chrono::steady_clock::time_point when) {
    {
      std::lock_guard lock(mutex);
      if (when >= due_hint) return;
      due_hint = when;
      ++events;
    }
    cv.notify_one();
  }

  // Blocked children a completion of this daemon unblocked (CompletionReport::unblocked):
  // the fetcher claims them by id, without a walk of the claim index, unless a claim of
  // its own is due anyway.
  void jobs_unblocked(const std::vector<std::int64_t>& ids) {
    if (ids.empty()) return;
    {
      std::lock_guard lock(mutex);
      unblocked.insert(unblocked.end(), ids.begin(), ids.end());
      ++events;
    }
    cv.notify_one();
  }

  std::mutex mutex;
  std::condition_variable_any cv;
  // Guarded by mutex.
  bool woken = true;        // the fetcher clears it when it claims
  bool for_insert = false;  // set with woken by wake_for_insert, cleared with it
  // Set with woken by wake(), cleared with it: a wake-up the fetcher must not space out as
  // it does NOTIFYs that found nothing (Fetcher::kNotifyGapMax).
  bool woken_not_for_insert = false;
  std::uint64_t events = 0;    // counts the calls: a waiter waits for it to change
  std::uint64_t written = 0;   // counts completions_written()
  bool wants_written = false;  // set by the fetcher: completions_written() ends its wait
  // The earliest due_at() not yet taken by the fetcher (which resets it to max).
  std::chrono::steady_clock::time_point due_hint = std::chrono::steady_clock::time_point::max();
  std::vector<std::int64_t> unblocked;  // jobs_unblocked() not yet taken by the fetcher

  // The server process of the completer's session (CompletionReport::notify_pid; 0: none).
  // The NOTIFY of new jobs that its writes send is ignored by this daemon's listener: after
  // each write the completer says itself what became due (jobs_unblocked, or a wake-up).
  // Unguarded: the listener reads it for each NOTIFY.
  std::atomic<int> ignored_notify_pid{0};
};

}  // namespace pgjobd
