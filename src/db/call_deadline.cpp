// CallDeadline: one watcher thread for the process, waking at the earliest armed deadline.

#include "db/call_deadline.hpp"

#include <libpq-fe.h>
#include <sys/socket.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <utility>
#include <vector>

#include "db/connection.hpp"

namespace pgjobd {
namespace {

using Clock = std::chrono::steady_clock;

class DeadlineWatcher {
 public:
  static DeadlineWatcher& instance() {
    static DeadlineWatcher watcher;
    return watcher;
  }

  // Arms a deadline `bound` from now; returns its ticket, and in `bound` the bound armed.
  std::uint64_t arm(int socket, Millis& bound, std::atomic<bool>* expired, bool shortenable) {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable())
      thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
    if (shortenable && cap_.count() > 0) bound = std::min(bound, cap_);
    const auto at = Clock::now() + bound;
    const std::uint64_t ticket = ++last_ticket_;
    const bool earliest = armed_.empty() || at < armed_.begin()->first.first;
    armed_.emplace(std::make_pair(at, ticket), Armed{socket, expired, shortenable});
    if (earliest) wake_.notify_one();
    return ticket;
  }

  Millis cap() {
    std::lock_guard lock(mutex_);
    return cap_;
  }

  void shorten_all(Millis cap) {
    std::lock_guard lock(mutex_);
    cap_ = cap;
    const auto latest = Clock::now() + cap;
    std::vector<std::pair<std::pair<Clock::time_point, std::uint64_t>, Armed>> moved;
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second.shortenable && it->first.first > latest) {
        moved.emplace_back(std::make_pair(latest, it->first.second), it->second);
        it = armed_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& entry : moved) armed_.insert(std::move(entry));
    wake_.notify_one();
  }

  void disarm(std::uint64_t ticket) {
    std::lock_guard lock(mutex_);
    for (auto it = armed_.begin(); it != armed_.end(); ++it) {
      if (it->first.second == ticket) {
        armed_.erase(it);
        return;
      }
    }
  }

 private:
  struct Armed {
    int socket;
    std::atomic<bool>* expired;
    bool shortenable;
  };

  void run(const std::stop_token& stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      if (armed_.empty()) {
        wake_.wait(lock, stop, [this] { return !armed_.empty(); });
        continue;
      }
      const auto at = armed_.begin()->first.first;
      if (Clock::now() < at) {
        wake_.wait_until(lock, stop, at, [this, at] {
          return !armed_.empty() && armed_.begin()->first.first < at;
        });
        continue;
      }
      // Under the lock: disarm() cannot return, and the session cannot be closed, while
      // its socket is shut down here.
      const Armed due = armed_.begin()->second;
      armed_.erase(armed_.begin());
      due.expired->store(true, std::memory_order_release);
      ::shutdown(due.socket, SHUT_RDWR);
    }
  }

  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::map<std::pair<Clock::time_point, std::uint64_t>, Armed> armed_;
  std::uint64_t last_ticket_ = 0;
  Millis cap_{0};        // shorten_all(): 0 = none
  std::jthread thread_;  // last: stopped and joined before the members it uses go away
};

}  // namespace

CallDeadline::CallDeadline(pqxx::connection_base& conn, Millis bound, bool shortenable) {
  if (bound.count() <= 0) return;
  const int socket = connection_socket(conn);
  if (socket < 0) return;  // not connected: the call fails by itself
  bound_ = bound;
  ticket_ = DeadlineWatcher::instance().arm(socket, bound_, &expired_, shortenable);
}

void CallDeadline::shorten_all(Millis cap) { DeadlineWatcher::instance().shorten_all(cap); }
Millis CallDeadline::shortened() { return DeadlineWatcher::instance().cap(); }

CallDeadline::~CallDeadline() {
  if (ticket_ != 0) DeadlineWatcher::instance().disarm(ticket_);
}

}  // namespace pgjobd
