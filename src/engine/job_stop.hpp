#pragma once
// Why the daemon asked a running job to stop. A handler sees only the stop_token; the
// runner reads the cause once the handler has returned, to say how the attempt ended: a
// job stopped for the daemon's sake (drain, lost lease) goes back to the queue, one
// stopped because pgjobd_cancel asked ends cancelled.

#include <atomic>
#include <stop_token>

namespace pgjobd {

enum class StopCause {
  kNone,
  kDaemon,     // drain timeout, lost lease: the job is released, the attempt not counted
  kCancelled,  // pgjobd_cancel: the job ends cancelled
};

class JobStop {
 public:
  // Thread-safe. A cancel outranks a daemon stop, whichever came first: the row's cancel
  // request makes the job end cancelled in any case (the completion statement reads it).
  void request(StopCause cause) {
    StopCause seen = cause_.load(std::memory_order_acquire);
    while (seen < cause && !cause_.compare_exchange_weak(seen, cause, std::memory_order_acq_rel)) {
    }
    source_.request_stop();
  }
  std::stop_token token() const { return source_.get_token(); }
  bool stop_requested() const { return source_.stop_requested(); }
  StopCause cause() const { return cause_.load(std::memory_order_acquire); }

 private:
  std::stop_source source_;
  std::atomic<StopCause> cause_{StopCause::kNone};
};

}  // namespace pgjobd
