#pragma once
// What wakes the claim loop: new jobs may be due (a NOTIFY, a reload, Engine::wake) or a
// worker freed its slot. The pool, the listener and the fetcher are each given the one
// signal, so none of them needs to hold another.

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace pgjobd {

struct ClaimSignal {
  // New jobs may be due: the next wait ends at once and a claim follows.
  void wake() {
    {
      std::lock_guard lock(mutex);
      woken = true;
      ++events;
    }
    cv.notify_one();
  }
  // Free slots changed: the waiter re-checks whether it may claim now.
  void slot_freed() {
    {
      std::lock_guard lock(mutex);
      ++events;
    }
    cv.notify_one();
  }

  std::mutex mutex;
  std::condition_variable_any cv;
  // Guarded by mutex.
  bool woken = true;         // the fetcher clears it when it claims
  std::uint64_t events = 0;  // counts both calls: a waiter waits for it to change
};

}  // namespace pgjobd
