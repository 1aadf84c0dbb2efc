#pragma once
// A deadline on one database call. libpq waits for an answer as long as the socket stays
// open, and a server can stay connected without answering: a commit waiting for a
// synchronous standby that is gone, a storage stall, a lock. TCP keepalives do not help
// there (the server's kernel answers them), nor does statement_timeout when the server
// itself is stuck or unreachable. So a call that is still waiting at its deadline has its
// socket shut down from a watcher thread: the blocked libpq call returns at once with a
// broken connection, the store drops the session, and its caller retries on a new one.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace pqxx {
class connection_base;
}

namespace pgjobd {

using Millis = std::chrono::milliseconds;

class CallDeadline {
 public:
  // Arms a deadline `bound` from now for a call on `conn` (opened by open_connection);
  // bound 0 arms none. `shortenable`: shorten_all() may bring it forward (false for an sql
  // handler's own statement, which a drain lets run while it waits for running jobs).
  CallDeadline(pqxx::connection_base& conn, Millis bound, bool shortenable = true);
  // Disarms it: once this returns, the watcher never touches the socket again, so the
  // session may be closed (and its descriptor reused) right after.
  ~CallDeadline();
  CallDeadline(const CallDeadline&) = delete;
  CallDeadline& operator=(const CallDeadline&) = delete;

  // Whether the deadline passed and the session's socket was shut down.
  bool expired() const { return expired_.load(std::memory_order_acquire); }
  // The bound it was armed with: the one asked for, or shorten_all()'s cap when shorter.
  Millis bound() const { return bound_; }

  // From now on (for the rest of the process) no shortenable call waits longer than `cap`,
  // those in flight included: a drain gives each of its calls a short bound, so a database
  // that stopped answering cannot stretch the process's exit by a full call_timeout per
  // step.
  static void shorten_all(Millis cap);
  // The cap shorten_all() set, or 0 before any: connecting honours it too.
  static Millis shortened();

 private:
  std::uint64_t ticket_ = 0;  // 0: not armed
  Millis bound_{0};
  std::atomic<bool> expired_{false};
};

}  // namespace pgjobd
