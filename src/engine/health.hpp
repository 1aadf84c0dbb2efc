#pragma once
// Readiness and liveness as the engine's parts see them. Each part reports a problem (or
// none) under its own name, and the loops that must reach the database (claims, heartbeats,
// completions) mark each call in flight: the daemon is ready when no part has a problem and
// no such call has waited longer than the stall bound (a database that stopped answering
// shows within seconds, long before the call's deadline). Backs /readyz; wedged() backs
// /healthz and the systemd watchdog.

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <string>

namespace pgjobd {

class Health {
 public:
  using Clock = std::chrono::steady_clock;

  void set_problem(const std::string& part, std::string problem) {
    std::lock_guard lock(mutex_);
    if (problem.empty()) {
      problems_.erase(part);
    } else {
      problems_[part] = std::move(problem);
    }
  }
  void clear(const std::string& part) { set_problem(part, {}); }

  // A database call of `part` in flight from its construction to its destruction.
  class CallWatch {
   public:
    CallWatch(Health& health, std::string part) : health_(health), part_(std::move(part)) {
      std::lock_guard lock(health_.mutex_);
      health_.in_flight_[part_] = Clock::now();
    }
    ~CallWatch() {
      std::lock_guard lock(health_.mutex_);
      health_.in_flight_.erase(part_);
    }
    CallWatch(const CallWatch&) = delete;
    CallWatch& operator=(const CallWatch&) = delete;

   private:
    Health& health_;
    const std::string part_;
  };
  [[nodiscard]] CallWatch watch_call(const std::string& part) { return CallWatch(*this, part); }

  // A call in flight longer than this makes the daemon not ready (0: never).
  void set_stall_after(std::chrono::milliseconds bound) {
    std::lock_guard lock(mutex_);
    stall_after_ = bound;
  }

  // Empty when ready; else "part: problem; part: problem".
  std::string problems() const {
    std::lock_guard lock(mutex_);
    std::string text;
    const auto add = [&text](const std::string& part, const std::string& problem) {
      if (!text.empty()) text += "; ";
      text += part;
      text += ": ";
      text += problem;
    };
    for (const auto& [part, problem] : problems_) add(part, problem);
    if (stall_after_.count() > 0) {
      for (const auto& [part, waited] : waits_longer_than_locked(stall_after_)) {
        add(part, "no answer from the database for " + waited);
      }
    }
    return text;
  }

  // Empty unless a watched call has been in flight longer than `bound` (its deadline and
  // more: the loop is wedged); else which, and for how long.
  std::string wedged(std::chrono::milliseconds bound) const {
    std::lock_guard lock(mutex_);
    std::string text;
    for (const auto& [part, waited] : waits_longer_than_locked(bound)) {
      if (!text.empty()) text += "; ";
      text += part;
      text += ": a database call has not returned for ";
      text += waited;
    }
    return text;
  }

 private:
  std::map<std::string, std::string> waits_longer_than_locked(
      std::chrono::milliseconds bound) const {
    std::map<std::string, std::string> out;
    const auto now = Clock::now();
    for (const auto& [part, since] : in_flight_) {
      if (now - since <= bound) continue;
      const double seconds = std::chrono::duration<double>(now - since).count();
      out[part] = std::to_string(static_cast<long long>(std::floor(seconds))) + "s";
    }
    return out;
  }

  mutable std::mutex mutex_;
  std::map<std::string, std::string> problems_;
  std::map<std::string, Clock::time_point> in_flight_;
  std::chrono::milliseconds stall_after_{0};
};

}  // namespace pgjobd
