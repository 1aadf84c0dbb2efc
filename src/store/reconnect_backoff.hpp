#pragma once
// Capped exponential backoff with jitter for loops that retry the database: 100ms, 200ms,
// ... up to 10s, each ±20% so daemons that lost the server together do not return in
// lockstep.

#include <chrono>

namespace pgjobd {

class ReconnectBackoff {
 public:
  std::chrono::milliseconds next();  // the wait before the next attempt
  // The shortest wait next() can draw now: a gate that a loop waiting next() never meets.
  std::chrono::milliseconds shortest() const;
  void reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  double base() const;  // the wait before jitter, in ms
  static constexpr double kJitter = 0.2;

  int failures_ = 0;
};

}  // namespace pgjobd
